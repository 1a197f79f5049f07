"""Exact attribution of aggregated I/O for any access pattern: every Trove operation of a collective
names exactly the calls whose bytes it moves, with their bytes, however many file ranges each
call's piece has; the attributed bytes add up to the bytes the disks moved.

The owners of every operation's bytes are computed here, independently of the code under test:
from the decomposition of the program and the simple_stripe arithmetic (datafile n holds the
logical bytes ``[(k*c + n)*s, (k*c + n + 1)*s)`` at physical ``[k*s, (k+1)*s)``).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from pipeline.merged import open_merged
from pipeline.query import named_query, run_query
from tests.conftest import EXAMPLES, traced

pytestmark = pytest.mark.mpi

STRIP = 64 * 1024
SERVERS = 4
SUBARRAY = Path(__file__).parent / "programs" / "subarray_io.py"


def _logical(dfile: int, physical: int) -> int:
    stripe, within = divmod(physical, STRIP)
    return (stripe * SERVERS + dfile) * STRIP + within


def _pieces(dfile: int, disk_offset: int, size: int):
    """The logical ranges of ``size`` bytes at ``disk_offset`` on datafile ``dfile``, strip by strip."""
    end = disk_offset + size
    while disk_offset < end:
        n = min(end, (disk_offset // STRIP + 1) * STRIP) - disk_offset
        yield _logical(dfile, disk_offset), n
        disk_offset += n


def _trove_ops(run, op: str) -> list[tuple]:
    return run.q(f"""SELECT handle, disk_offset, size, file_offset, file_end, callids, callid_own
                     FROM server_ops WHERE op = '{op}' ORDER BY handle, disk_offset""")


def _check_every_operation(ops: list[tuple], owners_of) -> Counter:
    """Each operation's CallIDs and own bytes are those ``owners_of(lo, n)`` (CallID -> bytes of the
    logical range ``[lo, lo + n)``) says, and its logged file range is where its bytes are;
    return the distribution of CallIDs per operation."""
    dfile_of: dict[int, int] = {}
    per_op = Counter()
    for handle, disk_offset, size, file_offset, file_end, callids, callid_own in ops:
        # the datafile's number: where its first strip lies in the file (then checked for every operation)
        dfile = dfile_of.setdefault(handle, (file_offset - disk_offset % STRIP) // STRIP % SERVERS)
        pieces = list(_pieces(dfile, disk_offset, size))
        assert (file_offset, file_end) == (pieces[0][0], pieces[-1][0] + pieces[-1][1])
        expected = Counter()
        for lo, n in pieces:
            expected.update(owners_of(lo, n))
        assert dict(zip(callids, callid_own)) == dict(expected)
        assert len(callids) == len(callid_own)
        per_op[len(callids)] += 1
    return per_op


def _callids(run, func: str) -> dict[int, int]:
    return dict(run.q(f"SELECT rank, callid FROM calls WHERE func = '{func}'"))


def _check_bytes_add_up(run, func: str, trove_op: str, per_call: int) -> None:
    """Over the collective's calls the apportioned shares are the Trove bytes, each counted once
    (``per_call`` each), and each call's own bytes are its data (its size)."""
    trove = run.q(f"SELECT sum(size) FROM server_ops WHERE op = '{trove_op}'")[0][0]
    assert run.q(f"SELECT sum(share_bytes), count(*) FILTER (WHERE NOT exact) FROM arrows "
                 f"WHERE func = '{func}' AND op = '{trove_op}'") == [(trove, 0)]
    assert run.q(f"""SELECT DISTINCT share_bytes, own_bytes = size, inexact_arrows FROM fanout
                     WHERE func = '{func}'""") == [(per_call, True, 0)]
    assert run.q(f"SELECT sum(share_bytes) FROM fanout WHERE func = '{func}'") == [(trove,)]
    # the shares of an operation are its size split in proportion to its calls' own bytes
    assert run.q(f"""SELECT count(*) FROM server_ops WHERE op = '{trove_op}'
                     AND list_sum(callid_bytes) <> size""") == [(0,)]


N = 1024  # 1024 x 1024 doubles: 8 MiB; each rank's quarter is 512 rows of 4 KiB


@pytest.fixture(scope="module")
def subarray(tmp_path_factory):
    return traced(tmp_path_factory.mktemp("exact"), "subarray", "-n", 4, "--servers", SERVERS,
                  "--strip-size", "64KiB", "--flow-buffer", "64KiB", SUBARRAY, "--n", N)


def _subarray_owners(callids: dict[int, int]):
    """The 2x2 decomposition: the rank of every double of the array, then the owners of a range."""
    rows, cols = np.divmod(np.arange(N * N), N)
    rank = (rows // (N // 2)) * 2 + cols // (N // 2)

    def owners_of(lo: int, n: int) -> Counter:
        assert lo % 8 == 0 and n % 8 == 0
        ranks, counts = np.unique(rank[lo // 8:(lo + n) // 8], return_counts=True)
        return Counter({callids[int(r)]: int(c) * 8 for r, c in zip(ranks, counts)})

    return owners_of


def _breakdown(run) -> dict[str, dict]:
    """the shipped query ``latency_breakdown`` on the run (as ``callid sql --query`` runs it): per CallID
    (hex), its row."""
    with open_merged(run.db) as m:
        names, rows = run_query(m, named_query("latency_breakdown").sql)
    return {row[0]: dict(zip(names, row)) for row in rows}


PARTS = ("exchange_ns", "wait_ns", "io_ns", "server_queue_ns", "disk_ns")


def test_subarray_collective_time_is_accounted_for_by_its_phases_requests_and_disks(subarray):
    """The 2x2 subarray Write_all of 4 ranks on 4 servers: on every rank the named parts of the
    latency breakdown (exchange, waiting for the aggregators, I/O requests, server queue, disk)
    account for at least 90 % of the call's time, and never more than all of it."""
    rows = _breakdown(subarray)
    calls = subarray.q("SELECT callid_hex, rank, func FROM calls WHERE func LIKE '%_all' ORDER BY rank")
    aggregators = {r for (r,) in subarray.q("SELECT DISTINCT rank FROM phases WHERE phase = 'io'")}
    assert aggregators == {0}  # one simulated host: one aggregator
    for hexid, rank, func in calls:
        row = rows[hexid]
        named = sum(row[p] for p in PARTS)
        assert all(row[p] >= 0 for p in (*PARTS, "other_ns"))
        assert named + row["other_ns"] == row["call_ns"]  # the parts never overlap
        if func == "MPI_File_write_all":
            assert named >= 0.9 * row["call_ns"], row
        if rank in aggregators:  # its own I/O: requests, server queue and disk
            assert min(row["io_ns"], row["server_queue_ns"], row["disk_ns"]) > 0, row
        else:  # only the exchange and waiting for the aggregator
            assert row["io_ns"] == row["server_queue_ns"] == row["disk_ns"] == 0, row
            assert min(row["exchange_ns"], row["wait_ns"]) > 0, row
    # `callid stats` shows the same split for the calls it lists
    for listed in subarray.stats["slowest_calls"]:
        assert listed == rows[listed["callid_hex"]]
    assert {"exchange_ns", "wait_ns", "io_ns", "accounted_pct"} <= set(subarray.stats["slowest_calls"][0])


def test_subarray_phases_lie_in_their_calls_and_the_aggregators_requests_name_their_calls(subarray):
    # every phase inside its call's span (one clock: the rank's), and the phases of each rank's calls
    assert subarray.q("""SELECT count(*) FROM phases p JOIN calls c USING (callid)
                         WHERE p.t_start < c.t_start OR p.t_end > c.t_end OR p.rank <> c.rank""") == [(0,)]
    assert subarray.q("SELECT count(*) FROM phases WHERE callid IS NULL") == [(0,)]
    phases = subarray.q("""SELECT c.func, p.rank, list(p.phase ORDER BY p.t_start)
                           FROM phases p JOIN calls c USING (callid) GROUP BY ALL ORDER BY ALL""")
    for func, rank, names in phases:
        io = ["io"] if rank == 0 else []
        assert names == (["plan", "exchange", *io, "wait"] if func == "MPI_File_write_all"
                         else ["plan", "exchange", *io, "wait", "exchange"]), (func, rank)
    # the aggregator's cycles moved the 8 MiB; every rank but the aggregator sent its 2 MiB
    assert subarray.q("""SELECT c.func, sum(p.bytes) FILTER (WHERE phase = 'io'),
                                sum(p.bytes) FILTER (WHERE phase = 'exchange')
                         FROM phases p JOIN calls c USING (callid) GROUP BY ALL ORDER BY ALL""") == [
        ("MPI_File_read_at_all", 8 << 20, 6 << 20), ("MPI_File_write_all", 8 << 20, 6 << 20)]
    # each aggregator request names the calls of its collective whose bytes it moves: those its disk
    # operations were attributed to (checked against the owners above), here all four
    for func in ("MPI_File_write_all", "MPI_File_read_at_all"):
        collective = set(_callids(subarray, func).values())
        requests = subarray.q(f"""
            SELECT r.req_seq, r.callid, r.callids, list_distinct(flatten(list(s.callids)))
            FROM rpcs r JOIN server_ops s ON s.rank = r.rank AND s.req_id = r.req_seq
            WHERE r.func = '{func}' AND s.layer = 'trove' GROUP BY ALL""")
        assert len(requests) >= SERVERS
        for _, callid, callids, moved in requests:
            assert callid is None and set(callids) == set(moved) == collective


def test_subarray_collective_every_trove_operation_names_exactly_the_ranks_owning_its_bytes(subarray):
    assert "read-back OK" in subarray.stdout
    # 512 row ranges per rank, far more than the 256 triples the old owner map held
    assert subarray.q("SELECT DISTINCT n_callids FROM arrows WHERE func = 'MPI_File_write_all'") == [(2,)]
    for func, op in (("MPI_File_write_all", "trove_write"), ("MPI_File_read_at_all", "trove_read")):
        ops = _trove_ops(subarray, op)
        # every 64 KiB strip holds 8 rows: 4 KiB of each of two ranks
        assert _check_every_operation(ops, _subarray_owners(_callids(subarray, func))) == {2: 128}
        assert {tuple(b) for *_, b in ops} == {(32768, 32768)}
        _check_bytes_add_up(subarray, func, op, 2 << 20)
    # the whole operation's size is kept: summed over arrows it counts each operation twice
    assert subarray.q("""SELECT sum(size), sum(share_bytes), sum(own_bytes) FROM arrows
                         WHERE op = 'trove_write'""") == [(16 << 20, 8 << 20, 8 << 20)]
    assert subarray.q("""SELECT sum(size), sum(share_bytes), sum(own_bytes) FROM fanout
                         WHERE func = 'MPI_File_write_all'""") == [(8 << 20, 8 << 20, 8 << 20)]  # as it is
    assert subarray.stats["inexact_arrows"] == 0 and subarray.stats["unattributed_server_ops"] == 0


BLOCK, BLOCKS, RANKS = 4096, 512, 8  # a vector view: rank r owns blocks r, r + 8, ...: 16 MiB


@pytest.mark.slow
def test_vector_collective_of_8_ranks_in_4_kib_blocks_is_attributed_exactly(tmp_path):
    run = traced(tmp_path, "vector", "-n", RANKS, "--servers", SERVERS, "--strip-size", "64KiB",
                 "--flow-buffer", "16KiB", EXAMPLES / "collective_write.py", "--block", "4KiB",
                 "--blocks", BLOCKS, "--cb-nodes", 2)
    assert "read-back OK" in run.stdout
    writes = _callids(run, "MPI_File_write_all")

    def write_owners(lo: int, n: int) -> Counter:
        assert lo % BLOCK == 0 and n % BLOCK == 0
        return Counter({writes[b % RANKS]: BLOCK for b in range(lo // BLOCK, (lo + n) // BLOCK)})

    # a 16 KiB flow buffer holds 4 blocks: of ranks 0-3 or of ranks 4-7
    ops = _trove_ops(run, "trove_write")
    assert _check_every_operation(ops, write_owners) == {4: 1024}
    _check_bytes_add_up(run, "MPI_File_write_all", "trove_write", 2 << 20)
    # every rank reads the whole file: each byte is all 8 calls' (each received all of it), the
    # operation's bytes shared equally
    reads = _callids(run, "MPI_File_read_at_all")

    def read_owners(lo: int, n: int) -> Counter:
        return Counter({callid: n for callid in reads.values()})

    assert _check_every_operation(_trove_ops(run, "trove_read"), read_owners) == {8: 1024}
    _check_bytes_add_up(run, "MPI_File_read_at_all", "trove_read", 2 << 20)
    # 16 MiB were read for 128 MiB requested: the disks read each byte once, each call received its 16 MiB
    assert run.q("""SELECT sum(size), sum(share_bytes), sum(own_bytes) FROM fanout
                    WHERE func = 'MPI_File_read_at_all'""") == [(128 << 20, 16 << 20, 128 << 20)]
    assert run.q("""SELECT DISTINCT size, share_bytes, own_bytes, exact FROM arrows
                    WHERE func = 'MPI_File_read_at_all'""") == [(16384, 2048, 16384, True)]
    # the read requests' ownership (8 calls in each of 128 buffers per datafile) would not fit one
    # request: each aggregator split its requests, and every one carries exact ownership
    assert run.q("SELECT count(*) FROM server_ops WHERE op = 'io_read'")[0][0] > 2 * SERVERS
    assert run.stats["inexact_arrows"] == 0 and run.stats["unattributed_server_ops"] == 0
