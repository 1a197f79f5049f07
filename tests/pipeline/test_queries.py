"""Every query that ships with callid says what it answers, runs by name, and answers it on a real
collective run; ``callid sql DB`` without a query lists the tables."""

from __future__ import annotations

import json

import duckdb
import pytest

from pipeline.query import named_queries
from tests.conftest import callid_cmd, cli

pytestmark = pytest.mark.mpi

QUERIES = sorted(named_queries())


@pytest.fixture(scope="module")
def db(collective_fanin):
    return collective_fanin.db


def _run(db, query: str) -> list[dict]:
    result = callid_cmd("sql", db, "--query", query, "--format", "json")  # (sql on a database: see cli)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def answers(db) -> dict[str, list[dict]]:
    """Each query's rows, run once as a user would for the tests that read them."""
    return {q: _run(db, q) for q in QUERIES}


def test_there_are_the_six_queries():
    assert QUERIES == ["collective_fanin", "latency_breakdown", "server_load_over_time",
                                         "small_io_share", "stragglers", "top_fanout"]


@pytest.mark.parametrize("query", QUERIES)
def test_each_query_says_what_it_answers_and_returns_rows(answers, query):
    named = named_queries()[query]
    assert named.sql.startswith("-- ") and named.question.endswith("?")
    assert named.question in named.description
    assert answers[query]


def test_the_answers(db, answers):
    rows = answers
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


def test_queries_are_listed_with_their_questions_and_a_bad_name_is_one_line():
    listed = cli("sql", "--list-queries", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {r["query"]: r["question"] for r in json.loads(listed.stdout)} == {
        name: q.question for name, q in named_queries().items()}
    bad = cli("sql", "x.duckdb", "--query", "nope")
    assert bad.returncode == 2 and bad.stderr.startswith("callid: error: no query named 'nope' (queries: ")


def test_sql_without_a_query_lists_the_tables_and_views_with_their_rows(db):
    result = callid_cmd("sql", db, "--json")
    assert result.returncode == 0, result.stderr
    listed = {r["name"]: (r["kind"], r["rows"]) for r in json.loads(result.stdout)}
    con = duckdb.connect(str(db), read_only=True)
    for name in ("calls", "arrows", "fanout", "server_ops", "clocks", "run", "events", "phases"):
        assert listed[name][1] == con.execute(f"SELECT count(*) FROM {name}").fetchall()[0][0]
    con.close()
    assert listed["calls"][0] == "view" and listed["run"][0] == "table"
    assert not any(name.startswith("_") for name in listed)  # the stored rows behind the views are not shown


def test_the_range_macros():
    """islands: overlapping ranges of a key share an island (touching ones do not); covered: the
    length of their union, per key."""
    from pipeline.domain import MACROS_SQL

    con = duckdb.connect()
    con.execute(MACROS_SQL)
    con.execute("""CREATE TABLE t AS SELECT * FROM (VALUES ('a', 0, 10), ('a', 5, 12), ('a', 12, 15),
                   ('a', 20, 21), ('b', 3, 4), ('b', 3, 4)) v(k, lo, hi)""")
    assert con.execute("SELECT k, lo, hi, island FROM islands('t') ORDER BY k, lo, hi").fetchall() == [
        ("a", 0, 10, 1), ("a", 5, 12, 1), ("a", 12, 15, 2), ("a", 20, 21, 3), ("b", 3, 4, 1), ("b", 3, 4, 1)]
    assert con.execute("SELECT * FROM covered('t') ORDER BY k").fetchall() == [("a", 16), ("b", 1)]
    # many equal ranges, sorted in parallel (their order among themselves differs from one pass to the
    # next): 100 ranges of 50 per key, each 1,000 times
    con.execute("""CREATE TABLE many AS SELECT 'k' || (i % 4) AS k, (i % 1000) // 10 * 100 AS lo,
                   (i % 1000) // 10 * 100 + 50 AS hi FROM range(400000) r(i)""")
    covered = con.execute("SELECT * FROM covered('many') ORDER BY k").fetchall()
    assert covered == [(f"k{i}", 5000) for i in range(4)]
    assert con.execute("""SELECT count(*), count(DISTINCT (k, island)), max(island) FROM islands('many')
                          GROUP BY ALL""").fetchall() == [(400000, 400, 100)]
    assert con.execute("""SELECT count(*) FROM (SELECT k, lo FROM islands('many') GROUP BY k, lo
                          HAVING count(DISTINCT island) > 1)""").fetchall() == [(0,)]
