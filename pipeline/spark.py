"""The merge on Apache Spark (``callid merge --engine spark``): the steps of :mod:`pipeline.merge`, their
SQL made for Spark by :mod:`pipeline.dialect`, run by a Spark session (local mode on this machine, or
the cluster at ``--master``), for traces no single machine merges.

Spark reads the logs and writes the stored tables (``calls``, ..., ``arrows``, ``fanout``) as Parquet
parts into the output's data directory (``arrows/part-*.parquet``, ...); the clock alignment's linear
programs run here, in Python, on the constraint pairs Spark computes; the catalog of views is DuckDB's,
as for the default engine, so every command reads the output unchanged.

Spark has no unsigned integers: it reads the logs' ``UINT64`` CallIDs as ``DECIMAL(20, 0)``; the views
``client_log`` and ``server_log`` hold their 64 bits as a ``BIGINT`` (the sentinel becomes -1), the
stored tables too, and the catalog's views cast them back.  PySpark is the optional extra
``callid[spark]``; Spark needs Java 17 or later.
"""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds

from callid_core import schema as S
from callid_core.errors import BadValue, InputError
from callid_core.units import parse_size
from pipeline.dialect import SPARK, signed
from pipeline.load import LogInfo, check_values, find_problems

#: the driver's memory when no ``--memory-limit`` is given
DRIVER_MEMORY = "4GiB"


def _memory(limit: str | None) -> str:
    """A size as ``--memory-limit`` takes it (``4GB``, ``512MiB``) as the JVM takes it (``4096m``)."""
    try:
        return f"{parse_size(limit or DRIVER_MEMORY) >> 20}m"
    except BadValue as exc:
        raise InputError(f"--memory-limit: {exc}") from None


class SparkEngine:
    """A Spark session running a merge's steps (see :class:`pipeline.merge.Engine`)."""

    dialect = SPARK

    def __init__(self, c: LogInfo, s: LogInfo, data: Path, scratch: Path, master: str | None = None,
                 memory: str | None = None) -> None:
        try:
            with warnings.catch_warnings():  # (about pandas, which the merge does not use)
                warnings.simplefilter("ignore", FutureWarning)
                from pyspark.sql import SparkSession
        except ImportError:
            raise InputError("--engine spark needs PySpark: pip install 'callid[spark]'") from None
        if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
            raise InputError("--engine spark needs Java 17 or later: install a JDK (e.g. apt-get install "
                             "openjdk-17-jre-headless) or set JAVA_HOME")
        self.logs, self.data, self.scratch = (c, s), data, scratch
        scratch.mkdir(parents=True, exist_ok=True)
        builder = (SparkSession.builder.master(master or "local[*]").appName("callid merge")
                   .config("spark.driver.memory", _memory(memory))
                   .config("spark.local.dir", str(scratch))
                   .config("spark.ui.enabled", "false")
                   .config("spark.sql.session.timeZone", "UTC")
                   .config("spark.sql.ansi.enabled", "true")
                   .config("spark.sql.ansi.doubleQuotedIdentifiers", "true")
                   .config("spark.sql.parquet.compression.codec", "zstd")
                   .config("spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
                   )
        log = scratch / "spark.log"  # (what the JVM prints: its errors are said here, in one line)
        saved = os.dup(2)
        try:
            with open(log, "wb") as f:
                os.dup2(f.fileno(), 2)
            self.spark = builder.getOrCreate()
        except Exception as exc:  # (the JVM did not start: Java too old, a bad --master, no memory)
            said = _jvm_error(log) or str(exc).splitlines()[0]
            raise InputError(f"--engine spark: Spark did not start ({said})") from None
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        self.spark.sparkContext.setLogLevel("ERROR")
        for info in (c, s):
            self._log_view(info)

    def _log_view(self, info: LogInfo) -> None:
        """View ``KIND_log`` of a log's files, its CallIDs as ``BIGINT``."""
        def column(c: pa.Field) -> str:
            if c.type == pa.uint64():
                return f"{signed(c.name)} AS {c.name}"
            if pa.types.is_list(c.type) and c.type.value_type == pa.uint64():
                return f"transform({c.name}, v -> {signed('v')}) AS {c.name}"
            return c.name
        frame = self.spark.read.parquet(*(str(Path(f).resolve()) for f in info.files))
        frame.selectExpr(*map(column, S.LOGS[info.kind].schema)).createOrReplaceTempView(f"{info.kind}_log")

    def check_values(self) -> None:
        """The logs' values counted by Spark; where one is bad, DuckDB finds the first bad row on this
        machine (by file and row number, which Spark does not know)."""
        for info in self.logs:
            with _said():
                found = find_problems(self.rows, SPARK, info, f"{info.kind}_log")
            if found.any:
                con = duckdb.connect()
                try:
                    check_values(con, info, found)
                finally:
                    con.close()

    def rows(self, sql: str) -> list[tuple]:
        with _said():
            return [tuple(row) for row in self.spark.sql(sql).collect()]

    def reader(self, sql: str) -> pa.RecordBatchReader:
        path = self.scratch / f"result-{len(list(self.scratch.glob('result-*')))}"
        with _said():
            self.spark.sql(sql).write.parquet(str(path))
        return ds.dataset(_parts(path), format="parquet").scanner(batch_size=1 << 20).to_reader()

    def write(self, select: str, name: str) -> list[str]:
        out = self.data / name
        with _said():
            self.spark.sql(select).write.parquet(str(out))
            self.spark.read.parquet(str(out)).createOrReplaceTempView(f"_{name}")
        files = _parts(out)
        for other in set(out.iterdir()) - {Path(f) for f in files}:  # (checksums, markers)
            other.unlink()
        return [f"{name}/{Path(f).name}" for f in files]

    def close(self) -> None:
        if getattr(self, "spark", None) is not None:
            self.spark.stop()
            self.spark = None


def _jvm_error(log: Path) -> str:
    """The first exception the JVM printed into ``log`` (its message), or ''."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    found = next((line for line in lines if "Exception" in line or line.startswith("Error")), "")
    return found.split(": ", 1)[-1].strip()


@contextmanager
def _said() -> Iterator[None]:
    """Spark's errors as :class:`InputError` of their first line."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    try:
        yield
    except (PySparkException, Py4JError) as exc:
        raise InputError(f"merge failed (spark): {str(exc).strip().splitlines()[0]}") from None


def _parts(directory: Path) -> list[str]:
    """The Parquet parts Spark wrote into ``directory``, in order."""
    return sorted(str(p) for p in directory.glob("part-*.parquet"))
