"""The merge on Spark (local mode) writes the tables the DuckDB merge writes, row for row (``EXCEPT ALL``
both ways), and every command reads them.  Skipped where PySpark or Java is missing, unless
``CALLID_REQUIRE_SPARK`` is set, as CI does."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import duckdb
import pytest

from callid_core import schema as S
from callid_core.tables import MERGED
from pipeline.merge import merge
from pipeline.merged import open_merged
from tests.conftest import callid_cmd
from tests.pipeline.test_merge import CLIENT_ROWS, NONE, SERVER_ROWS, A, B, _op, _write

pytestmark = pytest.mark.slow


def _spark_missing() -> str:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "PySpark is not installed (pip install 'callid[spark]')"
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        return "no Java (Spark needs Java 17 or later)"
    return ""


@pytest.fixture(scope="module")
def spark_ready() -> None:
    missing = _spark_missing()
    if missing and os.environ.get("CALLID_REQUIRE_SPARK"):
        pytest.fail(f"CALLID_REQUIRE_SPARK is set but {missing}")
    if missing:
        pytest.skip(missing)


def _differences(a: str, b: str) -> dict[str, tuple[int, int]]:
    """Per table: rows of ``a`` not in ``b`` and of ``b`` not in ``a`` (multisets), where either is not 0."""
    out = {}
    con, left, right = duckdb.connect(), open_merged(a), open_merged(b)
    for name in MERGED:
        con.register("l", left.sql(f"SELECT * FROM {name}").to_arrow_table())
        con.register("r", right.sql(f"SELECT * FROM {name}").to_arrow_table())
        counts = tuple(con.sql(f"SELECT count(*) FROM (SELECT * FROM {x} EXCEPT ALL SELECT * FROM {y})")
                       .fetchall()[0][0] for x, y in (("l", "r"), ("r", "l")))
        if any(counts):
            out[name] = counts
    return out


@pytest.mark.parametrize("servers", [3, 70])
def test_spark_merge_equals_duckdb_merge(tmp_path, spark_ready, servers):
    # skewed clocks whose drift wanders (several windows), collective calls (several CallIDs per
    # operation), write-back; 3 servers: fan-out per server as a pivot, the clock mapping written into
    # the SQL; 70: fan-out per server in its general form, and DuckDB's mapping a join (Spark's stays
    # written into its SQL): every path of the merge's SQL
    out = callid_cmd("synth", "--ranks", "6", "--ranks-per-host", "3", "--servers", servers,
                     "--calls", "3000", "--seed", "5", "--collective-share", "0.3", "--async-share", "0.2",
                     "--skew", "server:0=+250ms@15ppm~1ppm,host:1=-3ms@-12ppm", "-d", tmp_path / "logs")
    assert out.returncode == 0, out.stderr
    client, server = tmp_path / "logs" / "client.parquet", tmp_path / "logs" / "server.parquet"
    out = callid_cmd("merge", client, server, "--engine", "spark", "--storage", "parquet",
                     "-o", tmp_path / "spark", "--json")
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "WARN" not in out.stderr, out.stderr
    counts = json.loads(out.stdout)
    reference = merge(str(client), str(server), str(tmp_path / "duck.duckdb"))
    assert {k: counts[k] for k in reference} == reference
    assert reference["arrows"] > 0 and reference["clocks"] > 2
    assert _differences(str(tmp_path / "spark"), str(tmp_path / "duck.duckdb")) == {}
    # (the output is a merged output like any other)
    out = callid_cmd("stats", tmp_path / "spark", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)


def test_spark_merges_disk_operations_listing_a_callid_twice_or_an_unstamped_one(tmp_path, spark_ready):
    """(Never written by callid's servers, but a log may hold them: the same arrows as DuckDB's.)"""
    client = _write(tmp_path / "c.parquet", S.CLIENT_SCHEMA, CLIENT_ROWS, S.KIND_CLIENT)
    server = _write(tmp_path / "s.parquet", S.SERVER_SCHEMA, [
        *SERVER_ROWS,
        _op("io0", "trove", "trove_write", [A, B], 11, 100, 1010),  # several CallIDs, no ownership
        _op("io0", "trove", "trove_write", [A, NONE, B], 12, 90, 1020, callid_bytes=[30, 0, 60]),
        _op("io0", "trove", "trove_write", [A, A], 13, 80, 1030, callid_bytes=[50, 30]),  # one call, twice
        _op("io0", "trove", "trove_write", [B, NONE, B], 14, 70, 1040, callid_bytes=[20, 5, 40]),
        _op("io0", "trove", "trove_write", [A, NONE, B, A], 15, 60, 1050),  # no ownership: unknown
        _op("io0", "trove", "trove_write", [NONE, NONE], 16, 50, 1060),  # nobody's
    ], S.KIND_SERVER)
    out = callid_cmd("merge", client, server, "--engine", "spark", "--storage", "parquet",
                     "-o", tmp_path / "spark")
    assert out.returncode == 0, out.stderr
    merge(str(client), str(server), str(tmp_path / "duck.duckdb"))
    assert _differences(str(tmp_path / "spark"), str(tmp_path / "duck.duckdb")) == {}
    rows = open_merged(str(tmp_path / "spark")).sql(
        "SELECT callid, event_id, share_bytes, own_bytes, n_callids, exact FROM arrows WHERE event_id > 10 "
        "ORDER BY ALL")
    # (event 14: all 70 bytes are B's share, 60 of them its own, 5 the unstamped CallID's)
    assert rows.fetchall() == [
        (A, 11, None, None, 2, False), (A, 12, 30, 30, 2, True), (A, 13, 80, 80, 1, True),
        (A, 15, None, None, 2, False), (B, 11, None, None, 2, False), (B, 12, 60, 60, 2, True),
        (B, 14, 70, 60, 1, True), (B, 15, None, None, 2, False)]


def test_spark_merge_of_bad_input_says_what_in_one_line_and_writes_nothing(tmp_path, spark_ready):
    out = callid_cmd("merge", tmp_path / "none.parquet", tmp_path / "none.parquet", "--engine", "spark",
                     "-o", tmp_path / "m")
    assert out.returncode != 0 and "none.parquet: no such file" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "m").exists()
    out = callid_cmd("merge", tmp_path / "none.parquet", tmp_path / "none.parquet", "--master", "local[2]",
                     "-o", tmp_path / "m")
    assert out.returncode != 0 and "for --engine spark only" in out.stderr
    logs = tmp_path / "logs"
    assert callid_cmd("synth", "--calls", "50", "-d", logs).returncode == 0
    out = callid_cmd("merge", logs / "client.parquet", logs / "server.parquet", "--engine", "spark",
                     "--master", "foo://x", "-o", tmp_path / "m")
    assert out.returncode == 2 and "Spark did not start (Master must" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "m").exists()
    # a standalone master's URL without a port, or where nothing listens: said before the JVM starts
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # (a port of ours, not listening)
    refused = f"spark://127.0.0.1:{closed.getsockname()[1]}"
    for master, said in ((refused, "no Spark master answers (127.0.0.1:"),
                         ("spark://head", "not a master URL"), ("spark://head:70000", "not a master URL")):
        out = callid_cmd("merge", logs / "client.parquet", logs / "server.parquet", "--engine", "spark",
                         "--master", master, "-o", tmp_path / "m")
        assert out.returncode == 2 and said in out.stderr and f"--master {master}" in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and not (tmp_path / "m").exists()
    closed.close()
    out = callid_cmd("merge", logs / "client.parquet", logs / "server.parquet", "--engine", "spark",
                     "--memory-limit", "lots", "-o", tmp_path / "m")
    assert out.returncode == 2 and "--memory-limit lots" in out.stderr, out.stderr
    # a bad value (counted by Spark) is named by file, column and row, as the DuckDB merge names it
    client = _write(tmp_path / "c.parquet", S.CLIENT_SCHEMA, CLIENT_ROWS, S.KIND_CLIENT)
    server = _write(tmp_path / "s.parquet", S.SERVER_SCHEMA, [*SERVER_ROWS, SERVER_ROWS[1]], S.KIND_SERVER)
    said = []
    for engine in ("spark", "duckdb"):
        out = callid_cmd("merge", client, server, "--engine", engine, "-o", tmp_path / "m")
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
        said.append(out.stderr)
    assert said[0] == said[1] and "column 'event_id' repeats event_id 2 of server io0" in said[0], said
    assert not (tmp_path / "m").exists()


def test_a_master_that_takes_the_connection_and_never_answers_ends_the_merge_in_a_line(tmp_path, spark_ready):
    logs = tmp_path / "logs"
    assert callid_cmd("synth", "--calls", "50", "-d", logs).returncode == 0
    with socket.create_server(("127.0.0.1", 0)) as silent:  # (the kernel accepts; nobody answers)
        master = f"spark://127.0.0.1:{silent.getsockname()[1]}"
        out = callid_cmd("merge", logs / "client.parquet", logs / "server.parquet", "--engine", "spark",
                         "--master", master, "-o", tmp_path / "m")
    assert out.returncode == 2, out.stderr
    assert "Spark did not start (no master answered within Spark's minute" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and not (tmp_path / "m").exists()


def test_executors_whose_python_lacks_callid_are_said_in_one_line(tmp_path, spark_ready, monkeypatch):
    bare = tmp_path / "bare"  # (a Python without callid and its dependencies, as a cluster's may be)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", bare], check=True)
    monkeypatch.setenv("PYSPARK_PYTHON", str(bare / "bin" / "python"))
    logs = tmp_path / "logs"
    assert callid_cmd("synth", "--calls", "50", "-d", logs).returncode == 0
    out = callid_cmd("merge", logs / "client.parquet", logs / "server.parquet", "--engine", "spark",
                     "-o", tmp_path / "m", "--json")  # (--json: no progress lines)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "in a Python worker: ModuleNotFoundError: No module named" in out.stderr, out.stderr
    assert "needs callid installed" in out.stderr and not (tmp_path / "m").exists()
