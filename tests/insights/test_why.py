"""callid why (issue 40, item 4): one call's critical path, its peers and the findings that apply, on real
runs with a planted cause: a slow disk on io1 (the slowest call's time is on io1's disks) and a straggling
rank (the slowest call waited for it to arrive); the pieces of a path add up to the call's time."""

from __future__ import annotations

import json

import pytest

from callid import api
from tests.conftest import EXAMPLES, cli, traced

pytestmark = [pytest.mark.mpi, pytest.mark.slow]


@pytest.fixture(scope="module")
def slow_disk(tmp_path_factory):
    return traced(tmp_path_factory.mktemp("why"), "disk", "-n", 4, "--servers", 2, "--disk-model",
                  "latency=2ms", "--fault", "io1:disk=slow:10x", EXAMPLES / "collective_write.py",
                  "--block", "64KiB", "--blocks", 4)


@pytest.fixture(scope="module")
def straggler(tmp_path_factory):
    return traced(tmp_path_factory.mktemp("why"), "late", "-n", 2, "--fault", "rank1:straggle=200ms",
                  EXAMPLES / "collective_write.py", "--block", "64KiB")


def _adds_up(result: dict) -> None:
    call, path = result["call"], result["critical_path"]
    assert sum(p["dur_ns"] for p in path) == call["dur_ns"]
    at = 0
    for p in path:  # (in order, touching, never overlapping)
        assert p["at_ns"] == at and p["dur_ns"] >= 0
        at += p["dur_ns"]


def test_the_slowest_call_of_a_run_with_a_slow_disk_spent_its_time_on_it(slow_disk):
    result = api.why(slow_disk.db)
    _adds_up(result)
    assert result["call"]["func"].startswith("MPI_File_") and result["call"]["collective_ranks"] == 4
    verdict = result["verdict"]
    assert (verdict["kind"], verdict["who"]) == ("disk", "io1") and verdict["share"] > 0.5, verdict
    requests = [p for p in result["critical_path"] if p["kind"] == "request" and p["server"] == "io1"]
    assert requests and all(p["server_side"]["last_disk_op"]["dur_ns"] >= 10 * 2e6 * 0.999 for p in requests)
    every = [api.why(slow_disk.db, c) for (c,) in slow_disk.q("SELECT callid_hex FROM calls")]
    for r in every:
        _adds_up(r)
        assert r["peers"]["calls"] >= 1 and r["peers"]["slower"] < r["peers"]["calls"]


def test_a_call_that_waited_for_a_straggler_names_it(straggler):
    result = api.why(straggler.db)
    _adds_up(result)
    call, verdict = result["call"], result["verdict"]
    assert call["rank"] == 0 and call["last_rank"] == 1
    assert (verdict["kind"], verdict["who"]) == ("arrival", "rank 1") and verdict["ns"] >= 0.19e9, verdict
    assert result["critical_path"][0]["kind"] == "arrival" and result["peers"]["ratio"] > 1.5


def test_the_command(straggler):
    res = cli("why", straggler.db)
    assert res.returncode == 0, res.stderr
    assert "Critical path" in res.stdout and "waiting for rank 1 to arrive" in res.stdout
    ((late,),) = straggler.q("SELECT callid_hex FROM calls WHERE rank = 1 ORDER BY t_start LIMIT 1")
    res = cli("why", straggler.db, late, "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["call"]["callid_hex"] == late
    for bad, says in (("0x000009_00000000001", "no call with CallID"), ("zz", "is not a CallID")):
        res = cli("why", straggler.db, bad)
        assert res.returncode == 2 and says in res.stderr and "Traceback" not in res.stderr, res.stderr
