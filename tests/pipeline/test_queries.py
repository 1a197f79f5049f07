"""Every example query says what it answers, runs, and answers it on a real collective run."""

from __future__ import annotations

import json

import duckdb
import pytest

from tests.conftest import EXAMPLES, callid_cmd

pytestmark = pytest.mark.mpi

QUERIES = sorted((EXAMPLES / "queries").glob("*.sql"))


@pytest.fixture(scope="module")
def db(collective_fanin):
    return collective_fanin.db


def _run(db, query) -> list[dict]:
    result = callid_cmd("sql", db, "-f", query, "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_there_are_the_six_queries():
    assert [q.stem for q in QUERIES] == ["collective_fanin", "latency_breakdown", "server_load_over_time",
                                         "small_io_share", "stragglers", "top_fanout"]


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.stem)
def test_each_query_says_what_it_answers_and_returns_rows(db, query):
    assert query.read_text().startswith("-- ") and "?" in query.read_text().splitlines()[0]
    assert _run(db, query)


def test_the_answers(db):
    rows = {q.stem: _run(db, q) for q in QUERIES}
    con = duckdb.connect(str(db), read_only=True)
    most = con.execute("SELECT max(disk_ops) FROM fanout").fetchall()[0][0]
    assert rows["top_fanout"][0]["disk_ops"] == most
    con.close()
    assert rows["small_io_share"][0]["small_io_requests"] > 0
    fanin = {r["func"]: r for r in rows["collective_fanin"]}
    assert fanin["MPI_File_write_all"]["max_calls_per_disk_op"] == 4
    parts = ("exchange_ns", "wait_ns", "io_ns", "server_queue_ns", "disk_ns", "other_ns")
    assert all(min(r[p] for p in parts) >= 0 and sum(r[p] for p in parts) == r["call_ns"]
               for r in rows["latency_breakdown"])
    # the collective's aggregator (one: --cb-nodes 1) did its I/O; the other ranks waited for it
    writes = [r for r in rows["latency_breakdown"] if r["func"] == "MPI_File_write_all"]
    assert len(writes) == 4 and sum(r["io_ns"] > 0 and r["disk_ns"] > 0 for r in writes) == 1
    assert all(r["wait_ns"] > 0 and r["exchange_ns"] > 0 for r in writes)
    assert {r["server"] for r in rows["server_load_over_time"]} >= {"io0", "io1"}
