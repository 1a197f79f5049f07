"""Collective buffering and complete attribution: fan-in, aggregators, small I/O, concurrency."""

from __future__ import annotations

import json

import pytest

from tests.conftest import EXAMPLES, cli, traced

pytestmark = pytest.mark.mpi


def q(con, sql):
    return con.execute(sql).fetchall()


COLLECTIVE = [EXAMPLES / "collective_write.py", "--block", "256KiB", "--blocks", "4", "--cb-nodes", "2"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("collective")
    on = traced(tmp, "cb", "-n", 4, *COLLECTIVE)
    off = traced(tmp, "nocb", "-n", 4, *COLLECTIVE, "--cb-write", "disable", "--cb-read", "disable")
    return on, off


def test_aggregated_trove_writes_carry_exactly_the_calls_whose_data_they_hold(runs):
    con, stats = runs[0].con, runs[0].stats
    # 256 KiB blocks, 64 KiB flow buffers: every Trove write holds the data of one rank's call
    assert q(con, """SELECT DISTINCT len(callids) FROM server_ops WHERE op = 'trove_write'""") == [(1,)]
    per_call = q(con, """SELECT rank, disk_ops, servers, share_bytes FROM fanout
                         WHERE func = 'MPI_File_write_all' ORDER BY rank""")
    assert per_call == [(r, 16, 2, 1 << 20) for r in range(4)]
    # the Trove bytes equal the bytes written, and only the two aggregators sent them
    assert q(con, "SELECT sum(size) FROM server_ops WHERE op = 'trove_write'") == [(4 << 20,)]
    assert q(con, "SELECT DISTINCT rank FROM server_ops WHERE op = 'trove_write' ORDER BY 1") == [(0,), (1,)]
    assert stats["aggregators"] == [0, 1]
    assert stats["unattributed_server_ops"] == 0
    assert q(con, "SELECT count(*) FROM server_ops WHERE len(callids) = 0") == [(0,)]  # every layer


def test_without_collective_buffering_every_rank_writes_its_own_blocks(runs):
    con, stats = runs[1].con, runs[1].stats
    senders = q(con, "SELECT DISTINCT rank FROM server_ops WHERE op = 'trove_write' ORDER BY 1")
    assert senders == [(r,) for r in range(4)]
    assert stats["aggregators"] == [] and stats["fanin"]["shared_disk_ops"] == 0
    assert stats["unattributed_server_ops"] == 0


@pytest.mark.slow
def test_stats_compares_runs_side_by_side(runs):
    on, off = runs[0].out, runs[1].out
    both = cli("stats", on / "m.duckdb", off / "m.duckdb", "--json")
    assert both.returncode == 0
    figures = json.loads(both.stdout)
    assert [f["aggregators"] for f in figures] == [[0, 1], []]
    table = cli("stats", on / "m.duckdb", off / "m.duckdb").stdout
    assert "aggregators" in table and "fanin.max_calls_per_disk_op" in table


@pytest.mark.slow
def test_small_blocks_give_fan_in_every_disk_operation_serves_all_four_calls(tmp_path):
    run = traced(tmp_path, "fanin", "-n", 4, EXAMPLES / "collective_write.py",
                 "--block", "16KiB", "--blocks", "8", "--cb-nodes", "1")
    con, stats = run.con, run.stats
    # a 64 KiB Trove write of the aggregator holds one 16 KiB block of each of the 4 ranks
    assert q(con, "SELECT DISTINCT len(callids) FROM server_ops WHERE op = 'trove_write'") == [(4,)]
    assert q(con, """SELECT count(DISTINCT callid), sum(size) FROM arrows
                     WHERE func = 'MPI_File_write_all' AND op = 'trove_write'""") == [(4, 4 * (512 << 10))]
    assert stats["fanin"]["max_calls_per_disk_op"] == 4 and stats["aggregators"] == [0]
    assert stats["unattributed_server_ops"] == 0


# (the fast lane's: tests/cli/test_run.py::test_file_calls_on_the_simulated_file_system[1], whose 10000-byte
# writes take the small I/O path and have their trove_write arrows)
@pytest.mark.slow
def test_small_io_writes_use_the_small_io_path_and_each_has_arrows(tmp_path):
    run = traced(tmp_path, "small", "-n", 2, EXAMPLES / "mpi_io_test.py", "-b", "4KiB", "-i", 4)
    con, stats = run.con, run.stats
    assert q(con, "SELECT count(*) FROM server_ops WHERE op = 'small_io_write'") == [(8,)]
    assert q(con, "SELECT count(*) FROM server_ops WHERE layer = 'flow'") == [(0,)]
    per_write = q(con, "SELECT count(*), min(disk_ops) FROM fanout WHERE func = 'MPI_File_write_at'")
    assert per_write == [(8, 1)]
    assert stats["unattributed_server_ops"] == 0


@pytest.mark.slow
def test_mpi_io_test_does_collective_io_and_prints_the_ranks_times_spread(tmp_path):
    """PVFS2's mpi-io-test option -c: write_at_all and read_at_all; min, max, mean and variance of the
    ranks' times of each phase."""
    run = traced(tmp_path, "coll", "-n", 3, EXAMPLES / "mpi_io_test.py", "-b", "8KiB", "-i", 2, "-c",
                 "--json")
    figures = json.loads(run.stdout.splitlines()[0])
    assert figures["collective"] is True and figures["check"] is True
    for phase in ("write", "read"):
        times = figures[f"{phase}_rank_s"]
        assert 0 < times["min"] <= times["mean"] <= times["max"] == figures[f"{phase}_s"]
        assert times["var"] >= 0
    found = q(run.con, "SELECT func, count(*) FROM calls WHERE func LIKE '%at_all' GROUP BY ALL ORDER BY 1")
    assert found == [("MPI_File_read_at_all", 6), ("MPI_File_write_at_all", 6)]


@pytest.mark.slow
def test_concurrent_writers_log_overlapping_trove_events_that_add_up(tmp_path):
    # (each Trove write held 2 ms by the disk model: on a loaded machine the ranks' writes, each a fraction
    # of a millisecond without it, once ran one after the other, and no two overlapped)
    run = traced(tmp_path, "stress", "-n", 8, "--servers", 2, "--disk-model", "latency=2ms",
                 EXAMPLES / "mpi_io_test.py", "-b", "1MiB", "-i", 2, "--no-read")
    con, stats = run.con, run.stats
    # 8 ranks x 2 writes of 1 MiB, 64 KiB flow buffers: 16 Trove writes per MPI write
    assert q(con, "SELECT count(*), sum(size), count(DISTINCT event_id || server) FROM server_ops "
                  "WHERE op = 'trove_write'") == [(256, 16 << 20, 256)]
    overlapping = q(con, """SELECT count(*) FROM server_ops a JOIN server_ops b
                            ON a.server = b.server AND a.event_id < b.event_id
                            AND a.t_start < b.t_end AND b.t_start < a.t_end
                            WHERE a.op = 'trove_write' AND b.op = 'trove_write'""")[0][0]
    assert overlapping > 0
    assert stats["unattributed_server_ops"] == 0


@pytest.mark.slow
def test_default_is_one_aggregator_per_simulated_host(tmp_path):
    run = traced(tmp_path, "hosts", "-n", 4, "--ranks-per-host", 2,
                 EXAMPLES / "collective_write.py", "--block", "64KiB", "--blocks", "2")
    con, stats = run.con, run.stats
    assert stats["aggregators"] == [0, 2]
    clocks = q(con, "SELECT clock FROM clocks WHERE source = 'client' ORDER BY 1")
    assert clocks == [("host0",), ("host1",)]
