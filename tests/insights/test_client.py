"""Client-side insights (Drishti's triggers) on a real run of ``programs/client_patterns.py``; the
table of insights and thresholds (docs/insights.md) is current."""

from __future__ import annotations

import json

import pytest

from callid import api
from pipeline.insights import DETAILS_MAX, INSIGHTS, THRESHOLDS, reference_markdown, thresholds_of
from tests.conftest import ROOT, cli
from tests.insights import advised_options, insights_of, of_code

BLOCK, BLOCKS = 4096, (2500, 600)  # (rank 0 ahead by about 0.25 s: P706 needs noise_ns, 0.1 s)
CALLS = sum(BLOCKS)


@pytest.mark.mpi
@pytest.mark.slow
def test_client_patterns(tmp_path):
    found = insights_of(tmp_path / "out", "client_patterns.py", np=2)
    (small,) = of_code(found, "P701")
    assert small["severity"] == "high" and small["files"] == ["/pvfs2/patterns"]
    assert small["numbers"] == {"direction": "write", "requests": CALLS, "small": CALLS, "small_share": 1.0}
    (misaligned,) = of_code(found, "P702")
    assert misaligned["severity"] == "high"
    assert misaligned["numbers"] == {"requests": CALLS, "misaligned": CALLS, "misaligned_share": 1.0,
                                     "strip_size_bytes": 65536, "advised_strip_bytes": None}
    assert advised_options(misaligned) == []  # (512 bytes off: no strip of the record size aligns them)
    (pattern,) = of_code(found, "P703")  # rank 0 descending: all but its first random; rank 1 consecutive
    assert pattern["severity"] == "high" and pattern["ranks"] == [0]
    assert pattern["numbers"] == {"direction": "write", "requests": CALLS, "random": BLOCKS[0] - 1,
                                  "sequential": BLOCKS[1] + 1, "consecutive": BLOCKS[1] - 1,
                                  "random_share": round((BLOCKS[0] - 1) / CALLS, 4)}
    (mix,) = of_code(found, "P704")
    assert mix["severity"] == "info"
    assert mix["numbers"] == {"writes": CALLS, "reads": 0, "write_bytes": CALLS * BLOCK, "read_bytes": 0,
                              "write_share": 1.0}
    (data,) = of_code(found, "P705")  # rank 0 makes 4 times the calls of rank 1: it is the slowest
    assert data["severity"] == "high"
    n = data["numbers"]
    assert (n["slowest_rank"], n["slowest_rank_bytes"], n["fastest_rank"], n["fastest_rank_bytes"]) == \
        (0, BLOCKS[0] * BLOCK, 1, BLOCKS[1] * BLOCK)
    assert n["imbalance_share"] == round((BLOCKS[0] - BLOCKS[1]) / CALLS, 4)
    (time,) = of_code(found, "P706")
    assert time["severity"] == "high" and time["numbers"]["slowest_rank"] == 0
    assert time["numbers"]["slowest_ns"] - time["numbers"]["fastest_ns"] > 0.15 * time["numbers"]["total_ns"]
    (independent,) = of_code(found, "P707")
    assert independent["severity"] == "high"
    assert independent["numbers"] == {"direction": "write", "requests": CALLS, "independent": CALLS,
                                      "independent_share": 1.0, "ranks": 2}
    (meta,) = of_code(found, "P708")  # each rank's open and close
    assert meta["severity"] == "info" and meta["numbers"]["calls"] == 4
    (shared,) = of_code(found, "P711")  # (the one file both ranks write)
    assert (shared["drishti"], shared["severity"], shared["files"]) == ("P16", "high", ["/pvfs2/patterns"])
    assert shared["numbers"] == {"direction": "write", "requests": CALLS, "small": CALLS, "small_share": 1.0}
    assert shared["ranks"] == [0, 1] and "_all" in shared["example"]
    assert of_code(found, "P712") == []  # (every rank writes the file: P705's)


@pytest.mark.mpi
@pytest.mark.slow
def test_ranks_of_a_file_some_of_them_access_moving_different_amounts(tmp_path):
    """P712 (Drishti's P21): ranks 0 and 1 of 3 share a file, rank 0 writing 4 blocks, rank 1 one; the
    file rank 2 writes alone is no one's imbalance."""
    found = insights_of(tmp_path / "out", "P712_subset.py", np=3)
    (imbalance,) = of_code(found, "P712")
    assert (imbalance["drishti"], imbalance["severity"]) == ("P21", "high")
    assert imbalance["numbers"] == {"direction": "write", "files": 1, "max_imbalance_share": 0.75}
    assert imbalance["files"] == ["/pvfs2/pair"] and imbalance["ranks"] == [0]
    assert of_code(found, "P711") == []  # (5 writes: not many)


def test_insights_are_declared_and_the_doc_is_current():
    insights = INSIGHTS.rules()
    assert len({i.code for i in insights}) == len(insights)
    used = {t for i in insights for t in thresholds_of(i)}
    assert used <= set(THRESHOLDS)
    assert all(t.source for t in THRESHOLDS.values())
    assert (ROOT / "docs" / "insights.md").read_text() == reference_markdown(), \
        "docs/insights.md is stale: python -m pipeline.insights > docs/insights.md"


@pytest.mark.mpi
def test_the_command(demo, collective_fanin):
    listed = json.loads(cli("insights", "--list", "--json").stdout)
    assert [r["code"] for r in listed] == [i.code for i in INSIGHTS.rules()]
    one = cli("insights", demo.db, "--code", "P704", "--json")
    assert one.returncode == 0, one.stderr
    (mix,) = json.loads(one.stdout)["findings"]  # the demo: each rank writes 1 MiB and reads it back
    assert mix["numbers"] == {"writes": 2, "reads": 2, "write_bytes": 2 << 20, "read_bytes": 2 << 20,
                              "write_share": 0.5}
    text = cli("insights", demo.db).stdout
    assert text.startswith("callid insights: ") and "[INFO] P704 balanced by requests" in text
    # two runs: what appeared and disappeared, from one to the other and back
    pair = json.loads(cli("insights", demo.db, collective_fanin.db, "--json").stdout)
    back = json.loads(cli("insights", collective_fanin.db, demo.db, "--json").stdout)
    assert pair["appeared"] == back["disappeared"] and pair["disappeared"] == back["appeared"]
    assert any(f["code"] == "P707" and f["severity"] == "ok" for f in pair["appeared"])  # collective calls
    for bad, says in ((("insights", demo.db, "--code", "X999"), "no insight X999"),
                      (("insights", "/nonexistent.duckdb"), "no such file"),
                      (("insights",), "give one merged database")):
        res = cli(*bad)
        assert res.returncode == 2 and says in res.stderr and "Traceback" not in res.stderr, res.stderr


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """A synthetic run of 16 ranks on 4 servers, merged (every rank makes small requests; large reads
    and writes in 64 KiB disk operations)."""
    out = tmp_path_factory.mktemp("synth16")
    made = cli("synth", "--ranks", "16", "--servers", "4", "--calls", "400", "--fanout", "4", "--seed", "3",
               "-d", out)
    assert made.returncode == 0, made.stderr
    db = out / "m.duckdb"
    assert cli("merge", out / "client.parquet", out / "server.parquet", "-o", db).returncode == 0
    return db


def test_a_finding_says_how_many_of_its_subjects_it_does_not_name(synthetic):
    db = synthetic
    small = [f for f in api.insights(db) if f["code"] == "P701"]  # (every rank makes small requests)
    assert small and all(len(f["ranks"]) == DETAILS_MAX and f["more"] == {"ranks": 16 - DETAILS_MAX}
                         for f in small)
    assert f"and {16 - DETAILS_MAX} more" in cli("insights", db, "--code", "P701").stdout


@pytest.mark.mpi
def test_a_servers_busy_time_is_one_figure_everywhere(demo):
    """stats, S801 and S808 (and the report, from stats) read one busy time: the union of a server's disk
    operations, flushes and removes included."""
    busy = {s["server"]: s["busy_ns"] for s in api.stats(demo.db)["servers"]}
    found = api.insights(demo.db)
    (s801,) = of_code(found, "S801")
    io = [busy.get(s, 0) for s in s801["servers"]]
    assert (s801["numbers"]["max_busy_ns"], s801["numbers"]["min_busy_ns"]) == (max(io), min(io))
    (s808,) = of_code(found, "S808")
    assert s808["numbers"]["busy_ns"] == sum(busy.values())
    assert s808["numbers"]["meta_busy_ns"] == sum(v for s, v in busy.items() if s.startswith("meta"))


def test_comparisons_match_findings_by_subject_and_leave_noise_alone():
    from pipeline.insights import compare_insights

    def finding(code, severity, numbers, servers=(), files=("/pvfs2/f",), advice="x"):
        return {"code": code, "severity": severity, "files": list(files), "servers": list(servers),
                "recommendation": advice, "detail": advice, "numbers": numbers}

    # S804 of reads on both sides, other servers (2 and 8 of them) and other advice: the same subject
    a = [finding("S804", "warning", {"direction": "read", "disk_ops": 100}, ["io0", "io1"], advice="a"),
         finding("S801", "info", {"busy_imbalance_share": 0.16}),  # a severity flip on 12 % noise
         finding("S807", "warning", {"redundant_bytes": 1000}),
         finding("P701", "info", {"direction": "write", "small": 5})]
    b = [finding("S804", "warning", {"direction": "read", "disk_ops": 104}, [f"io{i}" for i in range(8)]),
         finding("S801", "ok", {"busy_imbalance_share": 0.145}),
         finding("S807", "high", {"redundant_bytes": 3000}),
         finding("P701", "info", {"direction": "read", "small": 5})]
    # stragglers of the read on both sides, of the write in b only; a straggler's slowest operation (an
    # event id) and the rank with the most metadata time name things, they do not measure them
    a += [finding("S810", "info", {"func": "MPI_File_read_at_all", "stragglers": 1, "slow_op_event_id": 133}),
          finding("P708", "info", {"calls": 1, "top_rank": 0})]
    b += [finding("S810", "info", {"func": "MPI_File_write_at_all", "stragglers": 1, "slow_op_event_id": 8}),
          finding("S810", "info", {"func": "MPI_File_read_at_all", "stragglers": 1, "slow_op_event_id": 9}),
          finding("P708", "info", {"calls": 1, "top_rank": 3})]
    diff = compare_insights(a, b)
    subjects = [(f["code"], f["numbers"].get("direction") or f["numbers"]["func"]) for f in diff["appeared"]]
    assert subjects == [("P701", "read"), ("S810", "MPI_File_write_at_all")]
    assert [f["numbers"]["direction"] for f in diff["disappeared"]] == ["write"]
    assert [(f["code"], f["was"], f["severity"], f["changes"]) for f in diff["changed"]] == [
        ("S807", "warning", "high", {"redundant_bytes": [1000, 3000]})]


def test_advised_strips_and_flow_buffers_are_options_callid_run_takes(synthetic):
    found = api.insights(synthetic)
    advised = [f for f in of_code(found, "S804") if f["severity"] in ("high", "warning")]
    assert advised and all(f["numbers"]["advised_strip_bytes"] for f in advised)
    for f in found:  # (what each says is its advised numbers, and callid run takes them)
        advised_options(f)


@pytest.mark.mpi
def test_a_file_too_small_to_spread_gets_no_strip_advice(tmp_path):
    found = insights_of(tmp_path / "out", "S801_tiny_file.py", np=1, run=("--servers", "4"))
    (s801,) = of_code(found, "S801")
    assert s801["severity"] == "high" and s801["numbers"]["advised_strip_bytes"] is None
    assert s801["recommendation"].startswith("leave the striping as it is: files of 512 bytes are too small")
    assert advised_options(s801) == []


def test_a_rule_that_cannot_run_within_the_memory_limit_runs_again_without_it(synthetic, monkeypatch):
    """Each rule's query runs under rules.MEMORY_LIMIT (DuckDB spills beyond it); one that cannot (here a
    limit of 1 MB: 20 of the 21 insights cannot) runs again under DuckDB's own, with the same findings."""
    from pipeline import rules
    from pipeline.merged import open_merged

    with open_merged(synthetic) as m:
        expected = api.insights(m)
    monkeypatch.setattr(rules, "MEMORY_LIMIT", "1MB")
    with open_merged(synthetic) as m:
        assert api.insights(m) == expected


def test_the_sizes_advice_names_are_those_callid_formats_and_parses(synthetic):
    """The SQL macro size_arg (insight_sql/_views.sql) is callid_core.units.format_size, and parse_size
    reads what it writes."""
    from callid_core.units import format_size, parse_size
    from pipeline.insights import run_insights
    from pipeline.merged import open_merged

    sizes = [1, 255, 256, 1000, 1024, 4096, 98304, 65 << 20, 3 << 30, (1 << 30) + 1024]
    with open_merged(synthetic) as m:
        run_insights(m)  # (the macros)
        got = [m.sql(f"SELECT size_arg({n}::BIGINT)").fetchall()[0][0] for n in sizes]
    assert got == [format_size(n) for n in sizes] and [parse_size(g) for g in got] == sizes


@pytest.mark.mpi
@pytest.mark.slow
def test_blocking_calls_are_named_per_direction(tmp_path):
    """P714 (Drishti's M06/M07) on a run: non-blocking writes, blocking reads: a warning for the reads."""
    found = insights_of(tmp_path / "out", "nonblocking_writes.py", np=2)
    (reads,) = of_code(found, "P714")
    assert reads["drishti"] == "M06" and reads["severity"] == "warning"
    assert reads["numbers"] == {"direction": "read", "blocking": 8, "non_blocking": 0}
    assert reads["files"] == ["/pvfs2/nonblocking"] and "MPI_File_iread_at" in reads["example"]


@pytest.mark.mpi
def test_a_collective_read_of_the_whole_file_by_every_rank_is_not_redundant(collective_fanin):
    """P710 counts what the file system moved: 4 ranks reading the whole file in one collective read
    through an aggregator read it once (the write, each rank its own blocks, once too)."""
    res = cli("insights", collective_fanin.db, "--code", "P710", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["findings"] == []
    reads = collective_fanin.q("SELECT count(DISTINCT rank), min(size) FROM calls "
                               "WHERE func = 'MPI_File_read_at_all'")
    assert reads == [(4, 4 * 2 * 1024)]  # (every rank reads the whole file: 4 ranks x 2 blocks of 1 KiB)
