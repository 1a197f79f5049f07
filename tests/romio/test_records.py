"""The interposition library in unmodified C programs, on the real MPI-IO of the mpich wheel (files in a
local directory, no FUSE): one record per call with the client log's columns, the file ranges of a
view computed from the decomposition here, CallIDs of the run's layout, and the records a killed
rank wrote."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pytest

from callid.romio import records as R
from callid.romio.build import find_mpicc, library
from callid.run import find_mpiexec
from callid_core.ids import Layout
from callid_core.schema import CLIENT
from tests.tracked import descendants

pytestmark = pytest.mark.mpi


def _run(programs, tmp: Path, name: str, *args, np: int = 4,
         layout: str = "64/23", **switches: str) -> dict[int, pa.Table]:
    env = dict(os.environ, **{R.ENV["dir"]: str(tmp), R.ENV["layout"]: layout},
               **{R.ENV[k]: v for k, v in switches.items()})
    cmd = [find_mpiexec(), "-n", str(np), "-genv", "LD_PRELOAD", str(library()), str(programs[name]),
           *map(str, args)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return {rank: R.read_rank(*R.rank_files(tmp, rank), "host0") for rank in range(np)}


def test_mpi_io_test_every_call_is_one_row_with_the_client_logs_columns(programs, tmp_path):
    block, iterations = 100_000, 3
    ranks = _run(programs, tmp_path, "mpi-io-test", "-b", block, "-i", iterations, "-f", tmp_path / "f")
    layout = Layout.parse("64/23")
    for rank, table in ranks.items():
        assert table.schema == CLIENT.schema
        rows = table.to_pylist()
        calls = [r for r in rows if r["kind"] == "call"]
        assert [r["func"] for r in calls] == ["MPI_File_open", *["MPI_File_write_at"] * iterations,
                                              "MPI_File_sync", *["MPI_File_read_at"] * iterations,
                                              "MPI_File_close"]
        # CallIDs of this rank, counter 1, 2, ... in call order
        assert [layout.unpack(r["callid"]) for r in calls] == [(rank, i) for i in range(1, len(calls) + 1)]
        data = [r for r in calls if r["func"] in ("MPI_File_write_at", "MPI_File_read_at")]
        assert [r["offset"] for r in data] == [(i * 4 + rank) * block for i in range(iterations)] * 2
        assert {(r["size"], r["bytes"], r["count"], r["datatype"]) for r in data} == {(block, block, block,
                                                                                       "MPI_BYTE")}
        opened = calls[0]
        assert (opened["amode"], opened["comm_size"], opened["collective"], opened["file"]) == (
            "RDWR,CREATE", 4, True, str(tmp_path / "f"))
        assert all(r["t_start"] <= r["t_end"] and r["error"] is None for r in rows)
        assert all(r["rank"] == rank and r["clock"] == "host0" for r in rows)
        # the non-I/O collectives are the program's own (kind 'mpi', not stamped)
        assert [r["func"] for r in rows if r["kind"] == "mpi"] == [
            "MPI_Barrier", "MPI_Allreduce", "MPI_Barrier", "MPI_Allreduce", "MPI_Allreduce"]
        assert {r["callid"] for r in rows if r["kind"] == "mpi"} == {layout.sentinel}
    # a collective call has one coll_seq and one communicator id on every rank
    colls = {rank: [(r["func"], r["coll_seq"], r["comm_id"]) for r in t.to_pylist()
                    if r["kind"] == "call" and r["collective"]] for rank, t in ranks.items()}
    assert all(c == colls[0] for c in colls.values()) and len(colls[0]) == 3


def test_subarray_view_gives_each_calls_file_ranges(programs, tmp_path):
    n = 64  # 64 x 64 doubles over a 2 x 2 grid: each rank 32 rows of 32 doubles (256 bytes)
    ranks = _run(programs, tmp_path, "subarray", "-n", n, "-f", tmp_path / "s", "-H", "cb_nodes=2")
    for rank, table in ranks.items():
        rows = {r["func"]: r for r in table.to_pylist() if r["kind"] == "call"}
        row0, col0 = rank // 2 * 32, rank % 2 * 32
        expected = [((row0 + i) * n + col0) * 8 for i in range(32)]
        for func in ("MPI_File_write_all", "MPI_File_read_all"):
            call = rows[func]
            assert call["region_offsets"] == expected and call["region_lengths"] == [256] * 32
            assert (call["offset"], call["size"], call["bytes"], call["count"]) == (
                expected[0], 8192, 8192, 1024)
        view = rows["MPI_File_set_view"]
        assert (view["etype"], view["filetype"], view["etype_extent"], view["extent"]) == (
            "MPI_DOUBLE", "subarray(MPI_DOUBLE)", 8, n * n * 8)
        assert view["region_offsets"] == expected and view["offset"] == 0
        assert rows["MPI_File_open"]["hints"] == "cb_nodes=2"
        seek = rows["MPI_File_seek"]  # (to the view's start: the offset passed, and the byte it is)
        assert (seek["whence"], seek["relative_offset"], seek["offset"]) == ("SET", 0, expected[0])
        assert {r["thread"] for r in table.to_pylist() if r["kind"] == "call"} == {0}
        assert (rows["MPI_File_open"]["file_size"], rows["MPI_File_close"]["file_size"]) == (0, None)


def test_a_killed_rank_keeps_the_records_it_wrote(programs, tmp_path):
    """Rank records go to a shared mapping: SIGKILL in the middle of the run loses none of them, and
    the call it was in is marked as not returned."""
    env = dict(os.environ, **{R.ENV["dir"]: str(tmp_path)})
    # many small blocks: the ranks are in the middle of their writes when one is killed
    cmd = [find_mpiexec(), "-n", "2", "-genv", "LD_PRELOAD", str(library()), str(programs["mpi-io-test"]),
           "-b", "1", "-i", "200000", "-f", str(tmp_path / "f")]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    rec, dat = R.rank_files(tmp_path, 1)
    deadline = time.monotonic() + 60
    while (not rec.exists() or len(R.records(rec)) < 1000) and time.monotonic() < deadline:
        time.sleep(0.05)
    killed = False
    for child in descendants(proc.pid):  # (this test's own processes only: the rank holding rank 1's file)
        try:
            fds = {os.readlink(f"/proc/{child}/fd/{fd}") for fd in os.listdir(f"/proc/{child}/fd")}
        except OSError:
            continue
        if str(rec) in fds:
            os.kill(child, signal.SIGKILL)
            killed = True
    assert killed
    try:
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    table = R.read_rank(rec, dat, "host0").to_pylist()
    writes = [r for r in table if r["func"] == "MPI_File_write_at"]
    assert len(writes) >= 1000
    # every record but the last whole, in order; the last one may be the call it was killed in
    assert [r["offset"] for r in writes] == [2 * i + 1 for i in range(len(writes))]
    unfinished = [r for r in table if r["error"] and "did not return" in r["error"]]
    assert len(unfinished) <= 1 and all(r is table[-1] for r in unfinished)


FAILING = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    MPI_File fh;
    MPI_Init(&argc, &argv);
    int err = MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh), cls;
    MPI_Error_class(err, &cls);
    printf("%d\n", cls == MPI_ERR_NO_SUCH_FILE);
    MPI_Finalize();
    return 0;
}
"""


def test_a_failed_call_is_logged_with_its_error_class(tmp_path):
    """The error of a failed call starts with its MPI error class (what callid check's E601 reports), as
    the Python tracer writes it."""
    (tmp_path / "failing.c").write_text(FAILING)
    exe = tmp_path / "failing"
    subprocess.run([find_mpicc(), "-o", exe, tmp_path / "failing.c"], check=True, capture_output=True)
    (rank,) = _run({"failing": exe}, tmp_path, "failing", tmp_path / "absent", np=1).values()
    (opened,) = [r for r in rank.to_pylist() if r["kind"] == "call"]
    assert opened["func"] == "MPI_File_open" and opened["error"].startswith("MPI_ERR_NO_SUCH_FILE: "), opened
    assert "does not exist" in opened["error"]  # (and MPICH's error stack: E601 joins its lines)


GROUPS = r"""
#include <mpi.h>
int main(int argc, char **argv) {
    MPI_File fh;
    MPI_Group kept, freed;
    MPI_Init(&argc, &argv);
    MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    MPI_File_get_group(fh, &kept);
    MPI_File_get_group(fh, &freed);
    MPI_Group_free(&freed);
    MPI_File_close(&fh);
    MPI_Finalize();
    return 0;
}
"""


def test_the_free_of_a_group_get_group_returned_is_logged(tmp_path):
    """MARMOT's F104 needs each MPI_Group_free of a file's group (and only those): a row of kind 'mpi',
    not collective, with the group's id (its open's comm_id)."""
    (tmp_path / "groups.c").write_text(GROUPS)
    exe = tmp_path / "groups"
    subprocess.run([find_mpicc(), "-o", exe, tmp_path / "groups.c"], check=True, capture_output=True)
    ranks = _run({"groups": exe}, tmp_path, "groups", tmp_path / "f", np=2)
    for rows in (t.to_pylist() for t in ranks.values()):
        (opened,) = [r for r in rows if r["func"] == "MPI_File_open"]
        assert [r["func"] for r in rows if r["func"] == "MPI_File_get_group"] == ["MPI_File_get_group"] * 2
        (free,) = [r for r in rows if r["func"] == "MPI_Group_free"]
        assert (free["kind"], free["collective"], free["comm_id"], free["comm_size"]) == (
            "mpi", False, opened["comm_id"], 2)


def test_the_switches_leave_hints_and_collectives_out_and_nested_calls_in(programs, tmp_path):
    """callid run --no-trace-hints --no-trace-mpi: the library logs neither; --trace-nested: the MPI
    calls ROMIO makes inside each traced call are rows of their own (kind 'nested', the call's CallID),
    and nothing else changes (its switches)."""
    args = ("-n", 64, "-f", tmp_path / "s", "-H", "cb_nodes=2")
    runs = {}
    for name, switches in (("on", {}), ("off", {"hints": "0", "mpi": "0"}), ("nested", {"nested": "1"})):
        (tmp_path / name).mkdir()
        ranks = _run(programs, tmp_path / name, "subarray", *args, **switches)
        runs[name] = [r for t in ranks.values() for r in t.to_pylist()]
    for name, hinted in (("on", True), ("off", False), ("nested", True)):
        rows = runs[name]
        assert bool([r for r in rows if r["kind"] == "mpi"]) is hinted
        assert bool([r for r in rows if r["hints"]]) is hinted
        assert bool([r for r in rows if r["kind"] == "nested"]) is (name == "nested")

    def kinds(rows, kind):
        return sorted((r["rank"], r["func"], r["callid"]) for r in rows if r["kind"] == kind)
    for kind in ("call", "mpi", "type"):  # (ROMIO's own datatypes get no ids)
        assert kinds(runs["nested"], kind) == kinds(runs["on"], kind), kind
    rows = runs["nested"]
    calls = {(r["rank"], r["callid"]): r for r in rows if r["kind"] == "call"}
    nested = [r for r in rows if r["kind"] == "nested"]
    for r in nested:  # (each inside the rank's call it was made in)
        call = calls[r["rank"], r["callid"]]
        assert call["t_start"] <= r["t_start"] <= r["t_end"] <= call["t_end"] and r["depth"] == 1, r
    made = {(calls[r["rank"], r["callid"]]["func"], r["func"]) for r in nested}
    assert {("MPI_File_open", "MPI_Allreduce"), ("MPI_File_write_all", "MPI_Alltoall"),
            ("MPI_File_write_all", "MPI_Isend"), ("MPI_File_read_all", "MPI_Waitall")} <= made, made
    files = {r["comm_id"] for r in calls.values() if r["func"] == "MPI_File_write_all"}
    assert {r["comm_id"] for r in nested if r["func"] == "MPI_Alltoall"} == files
    # the messages of a collective call are its exchange phases: the bytes sent agree
    total = 0
    for key, call in calls.items():
        if call["func"] in ("MPI_File_write_all", "MPI_File_read_all"):
            of_call = [r for r in rows if (r["rank"], r["callid"]) == key]
            sent = sum(r["size"] for r in of_call if r["kind"] == "nested" and r["func"] == "MPI_Isend")
            exchanged = sum(r["bytes"] for r in of_call if r["kind"] == "phase" and r["op"] == "exchange")
            assert sent == exchanged, (key, call["func"])
            total += sent
    assert total > 0


def test_a_straggling_rank_comes_late_to_its_calls(programs, tmp_path):
    """CALLID_ROMIO_STRAGGLE=1:NS (callid run --fault rank1:straggle=...): rank 1's library sleeps that
    long before each MPI-IO call, outside its time; rank 0's does not (it waits only in the barriers)."""
    ranks = _run(programs, tmp_path, "mpi-io-test", "-b", 4096, "-i", 2, "-f", tmp_path / "f", np=2,
                 straggle="1:250000000")
    for rank, table in ranks.items():
        calls = [r for r in table.to_pylist() if r["kind"] == "call"]
        gaps = [b["t_start"] - a["t_end"] for a, b in zip(calls, calls[1:])]
        assert all(g >= 250_000_000 for g in gaps) if rank == 1 else min(gaps) < 250_000_000, (rank, gaps)


P2P_PROGRAM = r"""
#include <mpi.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, data[10] = {0};
    double d[3] = {0};
    long l[4] = {0};
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    short s[16] = {0};
    MPI_Request q, two[2];
    if (rank == 0) {
        MPI_Send(data, 10, MPI_INT, 1, 7, MPI_COMM_WORLD);
        MPI_Isend(d, 3, MPI_DOUBLE, 1, 9, MPI_COMM_WORLD, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        MPI_Isend(s, 5, MPI_SHORT, 1, 10, MPI_COMM_WORLD, &two[0]);
        MPI_Isend(s + 8, 2, MPI_SHORT, 1, 11, MPI_COMM_WORLD, &two[1]);
        MPI_Waitall(2, two, MPI_STATUSES_IGNORE);
    } else {
        MPI_Recv(data, 10, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Irecv(d, 3, MPI_DOUBLE, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        MPI_Irecv(s, 8, MPI_SHORT, MPI_ANY_SOURCE, 10, MPI_COMM_WORLD, &two[0]);
        MPI_Irecv(s + 8, 8, MPI_SHORT, 0, 11, MPI_COMM_WORLD, &two[1]);
        int all = 0;
        while (!all) MPI_Testall(2, two, &all, MPI_STATUSES_IGNORE);
    }
    MPI_Bcast(l, 4, MPI_LONG, 1, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm reverse, alone;
    MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &reverse);
    MPI_Barrier(reverse);
    MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 0 : MPI_UNDEFINED, 0, &alone);  /* (rank 1: MPI_COMM_NULL) */
    MPI_Finalize();
    return 0;
}
"""


REUSE_PROGRAM = r"""
#include <mpi.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm a, b;
    MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &a);  /* (the ranks reversed) */
    MPI_Barrier(a);
    MPI_Comm_free(&a);
    MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &b);  /* (MPICH may give it the handle a had) */
    MPI_Barrier(b);
    MPI_Comm_free(&b);
    MPI_Finalize();
    return 0;
}
"""


def test_a_communicators_id_is_its_own_when_its_handle_was_another_ones(tmp_path):
    """The library keeps a communicator's id on it (an attribute MPI deletes with it): a communicator made
    after another was freed has its own id, whatever its handle."""
    (tmp_path / "reuse.c").write_text(REUSE_PROGRAM)
    exe = tmp_path / "reuse"
    subprocess.run([find_mpicc(), "-o", exe, tmp_path / "reuse.c"], check=True, capture_output=True)
    for table in _run({"reuse": exe}, tmp_path, "reuse", np=2).values():
        rows = [(r["func"], r["comm_id"], r["members"]) for r in table.to_pylist() if r["kind"] == "mpi"]
        (_, reversed_id, members), (_, barrier_a, _), (_, in_order_id, _), (_, barrier_b, _) = rows
        assert members == [1, 0] and reversed_id != in_order_id, rows
        assert (barrier_a, barrier_b) == (reversed_id, in_order_id), rows


def test_point_to_point_and_collective_details_are_logged(tmp_path):
    """HDTrace's calls without I/O: a send and a receive of any source and tag (logged with the one that
    matched), a non-blocking send and receive when issued and when completed (MPI_Wait, MPI_Waitall,
    MPI_Testall: by request id), a broadcast with its root and data, the
    communicators made with their members (as callid's own MPI-IO logs them: tests/client/test_mpi_calls)."""
    source = tmp_path / "p2p.c"
    source.write_text(P2P_PROGRAM)
    exe = tmp_path / "p2p"
    subprocess.run([find_mpicc(), "-O2", "-o", str(exe), str(source)], check=True, capture_output=True)
    ranks = _run({"p2p": exe}, tmp_path, "p2p", np=2)
    rows = {rank: [(r["func"], r["collective"], r["peer"], r["tag"], r["root"], r["count"], r["datatype"],
                    r["size"]) for r in table.to_pylist() if r["kind"] == "mpi"]
            for rank, table in ranks.items()}
    assert rows[0] == [("MPI_Send", False, 1, 7, None, 10, "MPI_INT", 40),
                       ("MPI_Isend", False, 1, 9, None, 3, "MPI_DOUBLE", 24),
                       ("MPI_Wait", False, 1, 9, None, 3, "MPI_DOUBLE", 24),
                       ("MPI_Isend", False, 1, 10, None, 5, "MPI_SHORT", 10),
                       ("MPI_Isend", False, 1, 11, None, 2, "MPI_SHORT", 4),
                       ("MPI_Waitall", False, 1, 10, None, 5, "MPI_SHORT", 10),
                       ("MPI_Waitall", False, 1, 11, None, 2, "MPI_SHORT", 4),
                       ("MPI_Bcast", True, None, None, 1, 4, "MPI_LONG", 32),
                       ("MPI_Barrier", True, None, None, None, None, None, None),
                       ("MPI_Comm_split", True, None, None, None, None, None, None),
                       ("MPI_Barrier", True, None, None, None, None, None, None),
                       ("MPI_Comm_split", True, None, None, None, None, None, None)]
    assert rows[1][:7] == [("MPI_Recv", False, 0, 7, None, 10, "MPI_INT", 40),
                           ("MPI_Irecv", False, 0, None, None, 3, "MPI_DOUBLE", 24),
                           ("MPI_Wait", False, 0, 9, None, 3, "MPI_DOUBLE", 24),  # (the tag matched)
                           ("MPI_Irecv", False, None, 10, None, 8, "MPI_SHORT", 16),
                           ("MPI_Irecv", False, 0, 11, None, 8, "MPI_SHORT", 16),
                           ("MPI_Testall", False, 0, 10, None, 5, "MPI_SHORT", 10),  # (what each received)
                           ("MPI_Testall", False, 0, 11, None, 2, "MPI_SHORT", 4)]
    for table in ranks.values():  # (each completion has its request's id, and its datatype's)
        rids = [(r["func"], r["rid"], r["type_ids"]) for r in table.to_pylist() if r["rid"] is not None]
        assert [rid for _, rid, _ in rids] == [1, 1, 2, 3, 2, 3], rids
        types = {r["type_id"]: r["datatype"] for r in table.to_pylist() if r["kind"] == "type"}
        assert [types[ids[0]] for _, _, ids in rids] == ["MPI_DOUBLE"] * 2 + ["MPI_SHORT"] * 4
    made = {rank: [(r["comm_size"], r["members"], r["comm_id"]) for r in table.to_pylist()
                   if r["func"] == "MPI_Comm_split"] for rank, table in ranks.items()}
    assert [m[:2] for m in made[0]] == [(2, [1, 0]), (1, [0])] and [m[:2] for m in made[1]] == [(2, [1, 0])]
    barriers = [r["comm_id"] for r in ranks[1].to_pylist() if r["func"] == "MPI_Barrier"]
    assert barriers[1] == made[1][0][2] == made[0][0][2] != barriers[0]  # (the barrier on the one made)


TYPES = r"""
#include <mpi.h>
int main(int argc, char **argv) {
    MPI_File fh;
    MPI_Datatype twice, absolute, bytes16, large;
    char buf[16] = {0};
    int ints[4] = {0};
    int len8[2] = {8, 8}, at[2] = {0, 4}, len4 = 4;
    MPI_Aint address;
    MPI_Init(&argc, &argv);
    MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    MPI_Type_indexed(2, len8, at, MPI_BYTE, &twice);  /* bytes 0-7 and 4-11 */
    MPI_Type_commit(&twice);
    MPI_File_write_at(fh, 0, buf, 1, twice, MPI_STATUS_IGNORE);
    MPI_File_read_at(fh, 0, buf, 1, twice, MPI_STATUS_IGNORE);
    MPI_File_read_at(fh, 0, buf, 12, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_Type_contiguous_c(16, MPI_BYTE, &large);  /* (MPI 4's large-count constructor) */
    MPI_Type_commit(&large);
    MPI_File_write_at(fh, 0, buf, 1, large, MPI_STATUS_IGNORE);
    MPI_Get_address(ints, &address);
    MPI_Type_create_hindexed(1, &len4, &address, MPI_INT, &absolute);
    MPI_Type_commit(&absolute);
    MPI_File_set_view(fh, 0, MPI_INT, absolute, "native", MPI_INFO_NULL);
    MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
    MPI_Type_contiguous(16, MPI_BYTE, &bytes16);
    MPI_Type_commit(&bytes16);
    MPI_File_set_view(fh, 0, twice, bytes16, "native", MPI_INFO_NULL);  /* (an etype holding bytes twice) */
    MPI_File_close(&fh);
    MPI_Finalize();
    return 0;
}
"""


def test_what_only_the_process_sees_of_its_datatypes_is_logged(tmp_path):
    """type_issues: a buffer's datatype with two blocks sharing bytes ('overlapping', on the write and
    the read: callid check's A411 judges the read), a filetype built from an absolute address
    ('address': A412), an etype holding bytes twice ('overlapping' on set_view: A407); nothing on a
    predefined buffer type or view. And every datatype once ('type' rows), the calls naming theirs by
    id; a type of MPI 4's large-count constructors too (MPICH refuses MPI_Type_get_envelope on it: the
    rank once aborted)."""
    (tmp_path / "types.c").write_text(TYPES)
    exe = tmp_path / "types"
    subprocess.run([find_mpicc(), "-o", exe, tmp_path / "types.c"], check=True, capture_output=True)
    (rank,) = _run({"types": exe}, tmp_path, "types", tmp_path / "data", np=1).values()
    calls = [(r["func"], r["type_issues"]) for r in rank.to_pylist() if r["kind"] == "call"]
    assert calls[1:-1] == [("MPI_File_write_at", "overlapping"), ("MPI_File_read_at", "overlapping"),
                           ("MPI_File_read_at", None), ("MPI_File_write_at", None),
                           ("MPI_File_set_view", "address"), ("MPI_File_set_view", None),
                           ("MPI_File_set_view", "overlapping")], calls
    # each datatype logged once, at its first use, with its constructor's arguments (HDTrace's datatype map)
    types = [(r["type_id"], r["func"], r["datatype"], r["size"], r["integers"], r["types"])
             for r in rank.to_pylist() if r["kind"] == "type"]
    assert types == [(1, "MPI_COMBINER_NAMED", "MPI_BYTE", 1, [], []),
                     (2, "MPI_COMBINER_INDEXED", "indexed(MPI_BYTE)", 16, [2, 8, 8, 0, 4], [1]),
                     (3, "MPI_COMBINER_CONTIGUOUS", "contiguous(MPI_BYTE)", 16, [16], [1]),  # (a large count)
                     (4, "MPI_COMBINER_NAMED", "MPI_INT", 4, [], []),
                     (5, "MPI_COMBINER_HINDEXED", "hindexed(MPI_INT)", 16, [1, 4], [4]),
                     (6, "MPI_COMBINER_CONTIGUOUS", "contiguous(MPI_BYTE)", 16, [16], [1])], types
    (absolute,) = [r["addresses"] for r in rank.to_pylist() if r["type_id"] == 5]
    assert len(absolute) == 1 and absolute[0] >= 1 << 32  # (the address of the program's array)
    type_ids = [r["type_ids"] for r in rank.to_pylist() if r["kind"] == "call"]
    assert type_ids[1:-1] == [[2], [2], [1], [3], [4, 5], [1, 1], [2, 6]]
