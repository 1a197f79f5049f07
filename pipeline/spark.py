"""The merge on Apache Spark (``callid merge --engine spark``): the steps of :mod:`pipeline.merge`, their
SQL made for Spark by :mod:`pipeline.dialect`, run by a Spark session (local mode on this machine, or
the cluster at ``--master``), for traces no single machine merges.

Spark reads the logs and writes the stored tables (``calls``, ..., ``arrows``, ``fanout``) as Parquet
parts into the output's data directory (``arrows/part-*.parquet``, ...); the clock alignment's linear
programs run in Spark's executors (Python workers, which need callid installed), one task per clock on
the constraint pairs Spark computed, and only the fits reach the driver; the catalog of views is DuckDB's,
as for the default engine, so every command reads the output unchanged.

Spark has no unsigned integers: it reads the logs' ``UINT64`` CallIDs as ``DECIMAL(20, 0)``; the views
``client_log`` and ``server_log`` hold their 64 bits as a ``BIGINT`` (the sentinel becomes -1), the
stored tables too, and the catalog's views cast them back.  PySpark is the optional extra
``callid[spark]``; Spark needs Java 17 or later.
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
import socket
import sys
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import duckdb
import numpy as np
import pyarrow as pa

from callid_core import schema as S
from callid_core.errors import BadValue, InputError
from callid_core.units import parse_size
from pipeline.clocks import Fit, FitOne
from pipeline.dialect import SPARK, signed
from pipeline.load import LogInfo, check_values, find_problems

T = TypeVar("T")

#: the driver's memory when no ``--memory-limit`` is given
DRIVER_MEMORY = "4GiB"
#: seconds a standalone master (``spark://``) has to accept a connection before the merge gives up
#: (Spark itself would try for a minute, then say only that no master answered)
MASTER_TIMEOUT = 10.0


def _memory(limit: str | None) -> str:
    """A size as ``--memory-limit`` takes it (``4GB``, ``512MiB``) as the JVM takes it (``4096m``)."""
    try:
        return f"{parse_size(limit or DRIVER_MEMORY, decimal=True) >> 20}m"
    except BadValue as exc:
        raise InputError(f"--memory-limit: {exc}") from None


class SparkEngine:
    """A Spark session running a merge's steps (see :class:`pipeline.merge.Engine`)."""

    dialect = SPARK

    def __init__(self, c: LogInfo, s: LogInfo, data: Path, scratch: Path, master: str | None = None,
                 memory: str | None = None) -> None:
        try:
            with _quiet():
                from pyspark.sql import SparkSession
        except ImportError:
            raise InputError("--engine spark needs PySpark: pip install 'callid[spark]'") from None
        if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
            raise InputError("--engine spark needs Java 17 or later: install a JDK (e.g. apt-get install "
                             "openjdk-17-jre-headless) or set JAVA_HOME")
        if master and master.startswith("spark://"):
            _check_master(master)
        self.logs, self.data, self.scratch = (c, s), data, scratch
        if (master or "local").startswith("local"):  # (the workers: this Python, whatever is on PATH)
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
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

    def beside(self, work: Callable[[SparkEngine], T]) -> Future[T]:
        """(now: Spark's tasks use every core already)"""
        done: Future[T] = Future()
        done.set_result(work(self))
        return done

    def clock_pairs(self, sql: str, n: int, ref: int) -> SparkPairs:
        path = self.scratch / "clock-pairs"
        with _said():
            self.spark.sql(sql).write.mode("overwrite").parquet(str(path))
        return SparkPairs(self.spark, path)

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


class SparkPairs:
    """:class:`pipeline.clocks.ClockPairs` as Parquet parts Spark wrote: each round's clocks are fitted
    by Spark's executors, one task per clock (on its pairs against the aligned clocks), and only their
    fits reach the driver."""

    def __init__(self, spark, path: Path) -> None:
        self.spark, self.path = spark, path

    def fit(self, done: np.ndarray, fit_one: FitOne) -> dict[int, list[Fit]]:
        aligned = ", ".join(map(str, np.flatnonzero(done[:-1]).tolist())) or "-1"
        with _said(), _quiet():
            self.spark.read.parquet(str(self.path)).createOrReplaceTempView("clock_pairs")
            sides = self.spark.sql(f"""
                SELECT b AS clock, FALSE AS earlier, a AS other, a_t AS t, b_t AS x FROM clock_pairs
                WHERE a IN ({aligned}) AND b NOT IN ({aligned})
                UNION ALL SELECT a, TRUE, b, b_t, a_t FROM clock_pairs
                WHERE b IN ({aligned}) AND a NOT IN ({aligned})
            """)
            found = sides.groupBy("clock").applyInArrow(_fitter(fit_one), "clock INT, fits BINARY").collect()
        return {row.clock: pickle.loads(row.fits) for row in found}


def _fitter(fit_one: FitOne) -> Callable[[pa.Table], pa.Table]:
    """What an executor runs on one clock's group of :meth:`SparkPairs.fit`: its fits, pickled.  (A
    function with type hints: PySpark infers from them how to call it.)"""
    def fit_group(group: pa.Table) -> pa.Table:
        return _fit_group(fit_one, group)
    return fit_group


def _fit_group(fit_one: FitOne, group: pa.Table) -> pa.Table:
    earlier = group.column("earlier").to_numpy(zero_copy_only=False)
    columns = [group.column(k).to_numpy() for k in ("other", "t", "x")]
    cid = group.column("clock")[0].as_py()
    fits = fit_one(cid, tuple(c[~earlier] for c in columns), tuple(c[earlier] for c in columns))
    return pa.table({"clock": pa.array([cid], pa.int32()), "fits": [pickle.dumps(fits)]})


@contextmanager
def _quiet() -> Iterator[None]:
    """Without PySpark's FutureWarning about pandas 3 (which it uses for ``applyInArrow``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


def _check_master(url: str) -> None:
    """:class:`InputError` unless one of the standalone masters of ``url`` (``spark://h1:p1,h2:p2``)
    accepts a connection within :data:`MASTER_TIMEOUT` seconds."""
    said = []
    for address in url.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InputError(f"--master {url}: not a master URL (spark://HOST:PORT[,HOST:PORT...])")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=MASTER_TIMEOUT).close()
            return
        except OSError as exc:
            said.append(f"{address}: {exc.strerror or exc}")
    raise InputError(f"--master {url}: no Spark master answers ({'; '.join(said)})")


def _jvm_error(log: Path) -> str:
    """What the JVM printed into ``log`` of why it stopped: that no master answered (Spark tries for a
    minute), or the first exception's message; or ''."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    if any("All masters are unresponsive" in line for line in lines):  # (its last try's error)
        tries = [line.split("connect to ", 1)[1] for line in lines if "Could not connect to " in line]
        return "no master answered within Spark's minute" + (f"; last: {tries[-1]}" if tries else "")
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
        raise InputError(f"merge failed (spark): {_what(str(exc))}") from None


def _what(error: str) -> str:
    """The line of a Spark error that says what went wrong: its first, or for a Python worker's
    exception (whose first line says only that there was one) the exception it ended with."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    raised = [line for line in lines if re.match(r"[\w.]+(Error|Exception): ", line)]
    if not lines or "from the Python worker" not in lines[0] or not raised:
        return lines[0] if lines else error
    hint = (" (the executors' Python needs callid installed: see PYSPARK_PYTHON)"
            if raised[-1].startswith("ModuleNotFoundError") else "")
    return f"in a Python worker: {raised[-1]}{hint}"


def _parts(directory: Path) -> list[str]:
    """The Parquet parts Spark wrote into ``directory``, in order."""
    return sorted(str(p) for p in directory.glob("part-*.parquet"))
