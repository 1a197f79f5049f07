"""Unmodified C programs traced end to end on the MPI library's own MPI-IO (ROMIO), through the FUSE
mount: ``callid run -n 4 ./program``, merged.  Every call has its rows, every disk operation is
attributed, and each one names exactly the calls whose bytes it moves, with their bytes: the owners
are computed here from the program's decomposition and the striping (``_check_every_operation``),
not read back from callid.  Under ROMIO's collective buffering one aggregator's writes serve every
rank's call."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from tests.client import test_exact_attribution as exact
from tests.conftest import callid_cmd, traced
from tests.romio.conftest import needs_fuse

pytestmark = [pytest.mark.mpi, pytest.mark.slow, needs_fuse]

STRIP, SERVERS = exact.STRIP, exact.SERVERS  # 64 KiB strips over 4 I/O servers (the owners' arithmetic)
FS = ["--servers", SERVERS, "--strip-size", "64KiB", "--flow-buffer", "64KiB"]
BLOCK, ITERATIONS = 100_000, 3  # mpi-io-test: blocks that straddle strips
N = 256  # subarray: 256 x 256 doubles, each rank's quarter 128 rows of 1 KiB


def _nth_calls(run, func: str) -> dict[tuple[int, int], int]:
    """(rank, i) -> the CallID of the rank's i-th call of ``func``."""
    rows = run.q(f"SELECT rank, callid FROM calls WHERE func = '{func}' ORDER BY rank, counter")
    seen: Counter = Counter()
    out = {}
    for rank, callid in rows:
        out[rank, seen[rank]] = callid
        seen[rank] += 1
    return out


def _block_owners(calls: dict[tuple[int, int], int]):
    """mpi-io-test: byte b is in block b // BLOCK, of rank (block % 4) in its iteration block // 4."""
    def owners_of(lo: int, n: int) -> Counter:
        out: Counter = Counter()
        while n:
            block = lo // BLOCK
            k = min(n, (block + 1) * BLOCK - lo)
            out[calls[block % 4, block // 4]] += k
            lo, n = lo + k, n - k
        return out
    return owners_of


def _subarray_owners(callids: dict[int, int]):
    """The 2x2 decomposition of the N x N doubles: the rank of every byte, then a range's owners."""
    rows, cols = np.divmod(np.arange(N * N), N)
    rank = (rows // (N // 2)) * 2 + cols // (N // 2)

    def owners_of(lo: int, n: int) -> Counter:
        ranks, counts = np.unique(rank[lo // 8:(lo + n + 7) // 8], return_counts=True)
        assert lo % 8 == 0 and n % 8 == 0
        return Counter({callids[int(r)]: int(c) * 8 for r, c in zip(ranks, counts)})
    return owners_of


def _check_run(run, data_funcs: dict[str, int]) -> None:
    """Every disk operation attributed; over the data calls' operations the attributed bytes are the disk
    bytes, each call's bytes are what it asked for (``data_funcs``: func -> bytes per call)."""
    assert run.q("""SELECT count(*) FROM server_ops s WHERE s.layer IN ('trove', 'meta')
                    AND NOT EXISTS (SELECT 1 FROM arrows a WHERE a.server = s.server
                                    AND a.event_id = s.event_id)""") == [(0,)]
    for func, per_call in data_funcs.items():
        op = "trove_write" if "write" in func else "trove_read"
        disk = run.q(f"""SELECT sum(size) FROM server_ops s WHERE op = '{op}' AND EXISTS (SELECT 1 FROM
                         arrows a WHERE a.func = '{func}' AND (a.server, a.event_id) = (s.server, s.event_id))
                         """)[0][0]
        assert run.q(f"SELECT sum(share_bytes), count(*) FILTER (WHERE NOT exact) FROM arrows "
                     f"WHERE func = '{func}' AND op = '{op}'") == [(disk, 0)]
        assert run.q(f"""SELECT DISTINCT share_bytes, own_bytes, inexact_arrows FROM fanout
                         WHERE func = '{func}'""") == [(per_call, per_call, 0)]


@pytest.fixture(scope="module")
def independent(tmp_path_factory, programs):
    return traced(tmp_path_factory.mktemp("romio"), "mit", "-n", 4, *FS, programs["mpi-io-test"],
                  "-b", BLOCK, "-i", ITERATIONS, "-f", "/pvfs2/mpi-io-test")


def test_mpi_io_test_every_call_traced_and_every_disk_operation_its_calls(independent):
    run = independent
    assert "data check: passed" in run.stdout
    for rank in range(4):
        funcs = [f for (f,) in run.q(f"SELECT func FROM calls WHERE rank = {rank} ORDER BY counter")]
        assert funcs == ["MPI_File_open", *["MPI_File_write_at"] * ITERATIONS, "MPI_File_sync",
                         *["MPI_File_read_at"] * ITERATIONS, "MPI_File_close"]
    for func, op in (("MPI_File_write_at", "trove_write"), ("MPI_File_read_at", "trove_read")):
        ops = run.q(f"""SELECT handle, disk_offset, size, file_offset, file_end, callids, callid_own
                        FROM server_ops WHERE op = '{op}' ORDER BY handle, disk_offset""")
        per_op = exact._check_every_operation(ops, _block_owners(_nth_calls(run, func)))
        assert set(per_op) <= {1, 2}  # a strip holds bytes of at most two blocks
    _check_run(run, {"MPI_File_write_at": BLOCK, "MPI_File_read_at": BLOCK})
    # independent I/O: each rank's thread made its own requests
    assert run.q("SELECT DISTINCT rank = callid >> 41 FROM rpcs WHERE op = 'io'") == [(True,)]


@pytest.fixture(scope="module")
def subarray(tmp_path_factory, programs):
    return traced(tmp_path_factory.mktemp("romio"), "sub", "-n", 4, *FS, programs["subarray"], "-n", N,
                  "-f", "/pvfs2/subarray")


def test_subarray_aggregators_operations_name_every_rank_whose_bytes_they_move(subarray):
    """ROMIO's two-phase write and read of a 2x2 subarray: the aggregator's operations serve the four
    ranks' calls, each with exactly the bytes of its quarter."""
    run = subarray
    assert "data check: passed" in run.stdout
    for func, op in (("MPI_File_write_all", "trove_write"), ("MPI_File_read_all", "trove_read")):
        callids = dict(run.q(f"SELECT rank, callid FROM calls WHERE func = '{func}'"))
        ops = run.q(f"""SELECT handle, disk_offset, size, file_offset, file_end, callids, callid_own
                        FROM server_ops WHERE op = '{op}' ORDER BY handle, disk_offset""")
        per_op = exact._check_every_operation(ops, _subarray_owners(callids))
        assert per_op == Counter({2: len(ops)})  # a 64 KiB strip: 32 rows of two ranks' halves
        # ROMIO chose the aggregators: on one host, one (cb_nodes defaults to the hosts)
        aggregators = run.q(f"SELECT DISTINCT rank FROM rpcs WHERE func = '{func}' AND op = 'io'")
        assert len(aggregators) == 1
    _check_run(run, {"MPI_File_write_all": N * N * 8 // 4, "MPI_File_read_all": N * N * 8 // 4})


@pytest.fixture(scope="module")
def nonblocking(tmp_path_factory, programs):
    return traced(tmp_path_factory.mktemp("romio"), "nb", "-n", 4, *FS, programs["nonblocking"],
                  "-b", STRIP, "-f", "/pvfs2/nonblocking")


def test_nonblocking_split_collective_and_shared_pointer_calls(nonblocking):
    """ROMIO does an iwrite_at's I/O in a POSIX AIO thread, the ordered and shared calls through its
    shared-file-pointer file: every operation is still its call's, exactly."""
    run = nonblocking
    assert "data check: passed" in run.stdout
    funcs = ["MPI_File_open", "MPI_File_set_size", "MPI_File_iwrite_at", "MPI_File_write_at_all_begin",
             "MPI_File_write_at_all_end", "MPI_File_seek_shared", "MPI_File_write_ordered",
             "MPI_File_write_shared", "MPI_File_sync", "MPI_File_iread_at", "MPI_File_iread_at",
             "MPI_File_seek_shared", "MPI_File_read_ordered", "MPI_File_close"]
    for rank in range(4):
        assert [f for (f,) in run.q(f"SELECT func FROM calls WHERE rank = {rank} ORDER BY counter")] == funcs
        # the completions of the non-blocking calls, and the split collective's two halves, share an id
        assert run.q(f"SELECT func, rid, bytes FROM waits WHERE rank = {rank} ORDER BY rid") == [
            ("MPI_File_iwrite_at", 1, STRIP), ("MPI_File_iread_at", 3, STRIP),
            ("MPI_File_iread_at", 4, STRIP)]
        assert run.q(f"SELECT DISTINCT rid FROM calls WHERE rank = {rank} AND func LIKE '%_all_%'") == [(2,)]
        # write_ordered: rank order from the shared file pointer, the offset computed by the library
        assert run.q(f"SELECT file_offset FROM calls WHERE rank = {rank} AND func LIKE '%_ordered'") == [
            ((8 + rank) * STRIP,)] * 2
    blocks = {}  # block number -> (func, rank) that wrote it
    for r in range(4):
        blocks |= {r: ("MPI_File_iwrite_at", r), 4 + r: ("MPI_File_write_at_all_begin", r),
                   8 + r: ("MPI_File_write_ordered", r)}
    callids = {(f, r): c for f, r, c in run.q("SELECT func, rank, callid FROM calls")}
    shared = {c for (f, _), c in callids.items() if f == "MPI_File_write_shared"}
    # the data file's operations (a 64 KiB strip each; the shared file pointer's file holds 8 bytes)
    for file_offset, callids_, nbytes in run.q(
            "SELECT file_offset, callids, callid_bytes FROM server_ops "
            "WHERE op = 'trove_write' AND size = 65536"):
        block = file_offset // STRIP
        if block in blocks:
            assert (callids_, nbytes) == ([callids[blocks[block]]], [STRIP])
        else:  # write_shared: one of the calls, in the order the ranks got there
            assert 12 <= block < 16 and len(callids_) == 1 and callids_[0] in shared
    assert run.q("SELECT count(*) FROM arrows WHERE NOT exact") == [(0,)]
    _check_run(run, {"MPI_File_iwrite_at": STRIP, "MPI_File_write_at_all_begin": STRIP,
                     "MPI_File_iread_at": STRIP})


@pytest.fixture(scope="module")
def demo_c(tmp_path_factory, programs):
    return traced(tmp_path_factory.mktemp("romio"), "demo", "-n", 2, "--servers", 2, "--strip-size", "64KiB",
                  "--flow-buffer", "64KiB", programs["callid_demo"])


def test_thesis_demo_in_c_reproduces_the_figures(demo_c):
    """The thesis demo's figures, as the Python demo shows them on callid's MPI-IO: 8 calls per rank with
    distinct CallIDs, and every 1 MiB write and read 16 disk operations, 8 of 64 KiB on each server."""
    run = demo_c
    assert "rank 0: read-back of rank 1's segment OK" in run.stdout
    assert "rank 1: read-back of rank 0's segment OK" in run.stdout
    assert run.q("SELECT rank, count(*), count(DISTINCT callid) FROM calls GROUP BY rank ORDER BY rank") == [
        (0, 8, 8), (1, 8, 8)]
    rows = run.q("""SELECT a.callid, a.func, a.server, count(*), sum(a.size), sum(a.share_bytes) FROM arrows a
                    WHERE a.func IN ('MPI_File_write', 'MPI_File_read') AND a.layer = 'trove'
                    GROUP BY ALL ORDER BY ALL""")
    assert {row[1:] for row in rows} == {(f, s, 8, 512 * 1024, 512 * 1024) for f in ("MPI_File_write",
                                                                                     "MPI_File_read")
                                         for s in ("io0", "io1")}
    assert len(rows) == 8  # 4 calls x 2 servers
    assert run.stats["unattributed_server_ops"] == 0


def _s811(tmp_path, programs, name: str, *hints: str) -> dict[str, dict]:
    """The subarray with ``hints`` on 4 ranks of one host: insight S811's findings, by hint."""
    run = traced(tmp_path, name, "-n", 4, *FS, programs["subarray"], "-n", N, "-f", "/pvfs2/hints",
                 *[a for h in hints for a in ("-H", h)])
    found = callid_cmd("insights", run.db, "--code", "S811", "--json")
    assert found.returncode == 0, found.stderr
    return {f["detail"].split("=")[0]: f for f in json.loads(found.stdout)["findings"]}


def test_insights_say_which_hints_romio_and_the_file_system_did_not_honour(tmp_path, programs):
    """cb_nodes=4 on one host: ROMIO aggregates with one rank (cb_config_list *:1); its UFS driver passes
    no striping to the file system.  With cb_config_list=*:4 the same cb_nodes is honoured."""
    found = _s811(tmp_path, programs, "ignored", "cb_nodes=4", "striping_factor=2", "striping_unit=1048576",
                  "cb_buffer_size=65536")
    assert {k: f["severity"] for k, f in found.items()} == {
        "cb_nodes": "warning", "striping_factor": "warning", "striping_unit": "warning",
        "cb_buffer_size": "ok"}
    # the aggregator's cycles: at most the buffer (the N x N doubles, 512 KiB, in 64 KiB cycles)
    assert found["cb_buffer_size"]["numbers"]["largest_cycle_bytes"] == 65536
    assert found["cb_nodes"]["numbers"]["aggregators"] == 1 and found["cb_nodes"]["ranks"] == [0]
    assert "cb_config_list=*:4" in found["cb_nodes"]["recommendation"]
    assert found["striping_factor"]["numbers"]["servers"] == SERVERS
    assert found["striping_unit"]["numbers"]["strip_size_bytes"] == STRIP
    honoured = _s811(tmp_path, programs, "honoured", "cb_nodes=4", "cb_config_list=*:4")
    assert honoured["cb_nodes"]["severity"] == "ok" and honoured["cb_nodes"]["numbers"]["aggregators"] == 4
    assert honoured["cb_nodes"]["ranks"] == [0, 1, 2, 3]


@pytest.fixture(scope="module")
def strided(tmp_path_factory, programs):
    return traced(tmp_path_factory.mktemp("romio"), "strided", "-n", 4, *FS, programs["strided"],
                  "-b", 4096, "-k", 16, "-f", "/pvfs2/strided")


def test_data_sieving_reads_and_holes_are_marked(strided):
    """Independent writes through a vector view: ROMIO's data sieving reads the extent the rank's blocks
    span, and writes it back whole.  Every operation is the rank's call's; the bytes of it that are the
    other ranks' blocks (computed here from the decomposition) are its holes; the reads a write caused
    are marked read-modify-write."""
    run = strided
    assert "data check: passed" in run.stdout
    block = 4096
    for rank, func, op, rmw, callids, file_offset, file_end, size, holes in run.q("""
            SELECT c.rank, c.func, s.op, a.rmw, s.callids, s.file_offset, s.file_end, s.size, s.holes
            FROM server_ops s JOIN arrows a USING (server, event_id) JOIN calls c ON c.callid = a.callid
            WHERE s.op IN ('trove_read', 'trove_write') AND c.func IN ('MPI_File_write', 'MPI_File_read')"""):
        assert len(callids) == 1
        assert rmw == (func == "MPI_File_write" and op == "trove_read")
        # the operation's own bytes: its pieces of the file range (64 KiB strips, 4 servers) in the rank's
        # blocks; the rest are holes
        owned = sum(max(0, min(b * block + block, hi) - max(b * block, lo))
                    for lo, hi in _strips(file_offset, file_end, size)
                    for b in range(lo // block, -(-hi // block)) if b % 4 == rank)
        assert holes == size - owned, (rank, func, op, file_offset, size)
    assert run.q("SELECT count(*) FILTER (WHERE rmw), count(*) FILTER (WHERE NOT exact) FROM arrows") == [
        (run.q("SELECT count(*) FROM server_ops WHERE op = 'trove_read' AND callid IN "
               "(SELECT callid FROM calls WHERE func = 'MPI_File_write')")[0][0], 0)]


def _strips(file_offset: int, file_end: int, size: int) -> list[tuple[int, int]]:
    """The file ranges of a disk operation of ``size`` bytes whose file range is [file_offset, file_end):
    its datafile's strips within it (every SERVERS-th strip from the first)."""
    out, lo = [], file_offset
    while size > 0:
        n = min(size, (lo // STRIP + 1) * STRIP - lo)
        out.append((lo, lo + n))
        size -= n
        lo = (lo // STRIP + SERVERS) * STRIP
    assert out[-1][1] <= file_end
    return out


def test_insights_report_data_sievings_holes_and_read_back(strided):
    found = callid_cmd("insights", strided.db, "--code", "S812", "--json")
    assert found.returncode == 0, found.stderr
    by_dir = {f["detail"].split(":")[0]: f for f in json.loads(found.stdout)["findings"]}
    write, read = by_dir["data sieving, write"], by_dir["data sieving, read"]
    assert write["severity"] == read["severity"] == "warning"
    assert write["numbers"]["data_bytes"] == read["numbers"]["data_bytes"] == 4 * 16 * 4096
    # the holes read back and written back, of every disk operation of the writes
    assert write["numbers"]["hole_bytes"] == strided.q(
        "SELECT sum(holes) FROM server_ops WHERE op IN ('trove_read', 'trove_write') AND callid IN "
        "(SELECT callid FROM calls WHERE func = 'MPI_File_write')")[0][0]
    assert write["numbers"]["read_back_bytes"] > 0 and read["numbers"]["read_back_bytes"] == 0
    assert "romio_ds_write=disable" in write["recommendation"]


def test_subarray_phases_seen_through_the_mpi_librarys_own_calls(subarray):
    """ROMIO's two-phase collective as its PMPI and libc calls show it: every rank plans, exchanges and
    waits; only the aggregator reads and writes, in I/O phases that cover the file; the latency breakdown
    accounts for each write_all call's time."""
    run = subarray
    for func in ("MPI_File_write_all", "MPI_File_read_all"):
        phases = dict(run.q(f"SELECT phase, list(DISTINCT rank ORDER BY rank) FROM phases "
                            f"WHERE func = '{func}' GROUP BY phase"))
        aggregators = [r for (r,) in run.q(f"SELECT DISTINCT rank FROM rpcs WHERE func = '{func}' "
                                           "AND op = 'io'")]
        assert phases == {"plan": [0, 1, 2, 3], "exchange": [0, 1, 2, 3], "wait": [0, 1, 2, 3],
                          "io": aggregators}
        assert run.q(f"SELECT sum(size) FROM phases WHERE func = '{func}' AND phase = 'io'") == [(N * N * 8,)]
        # every phase inside its call, on its rank's clock
        outside = run.q(f"""SELECT count(*) FROM phases p JOIN calls c USING (callid)
                            WHERE p.func = '{func}' AND (p.t_start < c.t_start OR p.t_end > c.t_end)""")
        assert outside == [(0,)]
    for row in exact._breakdown(run).values():
        if row["func"] == "MPI_File_write_all":
            assert row["accounted_pct"] >= 90, row
