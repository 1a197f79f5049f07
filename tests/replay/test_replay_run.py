"""``callid replay OUT/client.parquet``: a traced run's I/O again, under its own layout (the same
requested bytes and the same Trove operations) or another one ("what if")."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import callid_cmd, cli

pytestmark = pytest.mark.mpi


def data_calls(out: Path) -> list[tuple]:
    """(rank, function, size, file ranges) of every data access, in each rank's order."""
    rows = pq.read_table(out / "client.parquet").to_pylist()
    calls = sorted((r for r in rows if r["kind"] == "call" and ("read" in r["func"] or "write" in r["func"])),
                   key=lambda r: (r["rank"], r["t_start"]))
    return [(r["rank"], r["func"], r["size"], r["offset"], tuple(r["region_offsets"]),
             tuple(r["region_lengths"])) for r in calls]


def trove(out: Path) -> Counter:
    """The Trove data operations of a run: (server, op, bstream offset, size, file range)."""
    rows = pq.read_table(out / "server.parquet").to_pylist()
    return Counter((r["server"], r["op"], r["offset"], r["size"], r["file_offset"], r["file_end"])
                   for r in rows if r["op"] in ("trove_read", "trove_write"))


def replay(source: Path, out: Path, *args) -> dict:
    res = callid_cmd("replay", source / "client.parquet", "-d", out, "--json", *args)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_a_non_contiguous_collective_run_replays_to_the_same_calls_and_trove_operations(collective_fanin,
                                                                                        tmp_path):
    original = collective_fanin.out
    calls = data_calls(original)
    assert any(regions for *_, regions, _ in calls)  # the vector view: non-contiguous, regions logged
    summary = replay(original, tmp_path / "again")
    assert summary["collective_calls"] == 2  # write_all and read_at_all of the 4 ranks
    assert data_calls(tmp_path / "again") == calls
    assert trove(tmp_path / "again") == trove(original)
    assert sum(trove(original).values()) > 0


@pytest.mark.slow
def test_what_if_another_layout_compared_side_by_side(collective_fanin, tmp_path):
    out = tmp_path / "wide"
    replay(collective_fanin.out, out, "--servers", "4", "--strip-size", "1KiB", "--hint", "cb_nodes=2")
    assert [c[:3] for c in data_calls(out)] == [c[:3] for c in data_calls(collective_fanin.out)]
    servers = {k[0] for k in trove(out)}
    assert servers == {"io0", "io1", "io2", "io3"}
    res = cli("merge", out / "client.parquet", out / "server.parquet", "-o", out / "m.duckdb")
    assert res.returncode == 0, res.stderr
    res = cli("stats", collective_fanin.out / "m.duckdb", out / "m.duckdb")
    assert res.returncode == 0, res.stderr
    aggregators = next(line for line in res.stdout.splitlines() if line.startswith("aggregators"))
    assert aggregators.endswith("0-1 (2 ranks)")  # cb_nodes=2 in the replay, 1 in the original


@pytest.mark.slow
def test_the_demo_replays_with_its_reads_after_its_writes(demo, tmp_path):
    summary = replay(demo.out, tmp_path / "again")
    assert summary["collective_calls"] == 0
    assert data_calls(tmp_path / "again") == data_calls(demo.out)
    assert trove(tmp_path / "again") == trove(demo.out)
    inferred = pq.read_table(tmp_path / "again" / "client.parquet", columns=["inferred"])["inferred"]
    assert set(inferred.to_pylist()) == {None, "open"}  # nothing inferred but the open; no prefill


def test_a_server_log_is_not_a_source(collective_fanin, tmp_path):
    res = cli("replay", collective_fanin.out / "server.parquet", "-d", tmp_path / "r")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"callid: error: {collective_fanin.out / 'server.parquet'}: is a server log, expected a client log"]
