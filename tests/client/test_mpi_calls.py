"""HDTrace's calls without I/O on callid's own MPI-IO: point-to-point calls (the buffer and pickle
flavours, a receive from any source and tag logged with the one that matched, non-blocking ones when
issued, and their completions by the call that completed them), collectives with their root and
data, and the communicators made with their members, in ``mpi_calls``."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import traced

pytestmark = pytest.mark.mpi

PROGRAM = textwrap.dedent("""
    import numpy as np
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    if comm.rank == 0:
        comm.Send(np.arange(10, dtype="i4"), dest=1, tag=7)
        comm.send({"a": 1}, 1, tag=8)
        comm.Isend(np.zeros(3, "f8"), 1, 9).Wait()
        MPI.Request.Waitall([comm.Isend(np.zeros(5, "i2"), 1, 10), comm.Isend(np.zeros(2, "i2"), 1, 11)])
    else:
        comm.Recv(np.zeros(10, "i4"), source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)
        assert comm.recv(source=0, tag=8) == {"a": 1}
        comm.Irecv(np.zeros(3, "f8"), source=0, tag=MPI.ANY_TAG).Wait()
        pending = [comm.Irecv(np.zeros(8, "i2"), MPI.ANY_SOURCE, 10), comm.Irecv(np.zeros(8, "i2"), 0, 11)]
        while not MPI.Request.Testall(pending):
            pass
    comm.Bcast(np.zeros(4, "i8"), root=1)
    comm.Reduce(np.ones(2, "f8"), np.zeros(2, "f8") if comm.rank == 0 else None, op=MPI.SUM, root=0)
    comm.Barrier()
    reverse = comm.Split(0, key=-comm.rank)
    reverse.Barrier()
    alone = comm.Split(0 if comm.rank == 0 else MPI.UNDEFINED)  # (rank 1: MPI_COMM_NULL)
""")


def test_point_to_point_and_collective_details_are_logged(tmp_path):
    (tmp_path / "p2p.py").write_text(PROGRAM)
    run = traced(tmp_path, "out", "-n", 2, tmp_path / "p2p.py")
    rows = run.q("SELECT rank, func, collective, peer, tag, root, count, datatype, size FROM mpi_calls "
                 "ORDER BY rank, t_start, rid")
    assert rows == [
        (0, "MPI_Send", False, 1, 7, None, 10, "MPI_INT", 40),
        (0, "MPI_Send", False, 1, 8, None, None, None, None),  # (a pickled object: not described)
        (0, "MPI_Isend", False, 1, 9, None, 3, "MPI_DOUBLE", 24),
        (0, "MPI_Wait", False, 1, 9, None, 3, "MPI_DOUBLE", 24),
        (0, "MPI_Isend", False, 1, 10, None, 5, "MPI_SHORT", 10),
        (0, "MPI_Isend", False, 1, 11, None, 2, "MPI_SHORT", 4),
        (0, "MPI_Waitall", False, 1, 10, None, 5, "MPI_SHORT", 10),
        (0, "MPI_Waitall", False, 1, 11, None, 2, "MPI_SHORT", 4),
        (0, "MPI_Bcast", True, None, None, 1, 4, "MPI_LONG", 32),
        (0, "MPI_Reduce", True, None, None, 0, 2, "MPI_DOUBLE", 16),
        (0, "MPI_Barrier", True, None, None, None, None, None, None),
        (0, "MPI_Comm_split", True, None, None, None, None, None, None),
        (0, "MPI_Barrier", True, None, None, None, None, None, None),
        (0, "MPI_Comm_split", True, None, None, None, None, None, None),
        (1, "MPI_Recv", False, 0, 7, None, 10, "MPI_INT", 40),
        (1, "MPI_Recv", False, 0, 8, None, None, None, None),
        (1, "MPI_Irecv", False, 0, None, None, 3, "MPI_DOUBLE", 24),  # (posted for any tag)
        (1, "MPI_Wait", False, 0, 9, None, 3, "MPI_DOUBLE", 24),  # (the tag it matched)
        (1, "MPI_Irecv", False, None, 10, None, 8, "MPI_SHORT", 16),  # (posted for any source)
        (1, "MPI_Irecv", False, 0, 11, None, 8, "MPI_SHORT", 16),
        (1, "MPI_Testall", False, 0, 10, None, 5, "MPI_SHORT", 10),  # (what each received)
        (1, "MPI_Testall", False, 0, 11, None, 2, "MPI_SHORT", 4),
        (1, "MPI_Bcast", True, None, None, 1, 4, "MPI_LONG", 32),
        (1, "MPI_Reduce", True, None, None, 0, 2, "MPI_DOUBLE", 16),
        (1, "MPI_Barrier", True, None, None, None, None, None, None),
        (1, "MPI_Comm_split", True, None, None, None, None, None, None),
        (1, "MPI_Barrier", True, None, None, None, None, None, None),
    ]
    # each completion has its request's id: the issuing row's
    pairs = run.q("SELECT i.rank, i.func, d.func FROM mpi_calls i JOIN mpi_calls d USING (rank, rid) "
                  "WHERE i.func LIKE 'MPI_I%' AND d.func NOT LIKE 'MPI_I%' ORDER BY i.rank, i.t_start")
    assert pairs == [(0, "MPI_Isend", "MPI_Wait"), (0, "MPI_Isend", "MPI_Waitall"),
                     (0, "MPI_Isend", "MPI_Waitall"), (1, "MPI_Irecv", "MPI_Wait"),
                     (1, "MPI_Irecv", "MPI_Testall"), (1, "MPI_Irecv", "MPI_Testall")]
    # a call's datatype by its id, each logged once per rank (a pickled object's: none)
    named = run.q("SELECT DISTINCT m.datatype = t.datatype FROM mpi_calls m JOIN datatypes t "
                  "ON t.rank = m.rank AND t.type_id = m.type_ids[1] WHERE m.datatype IS NOT NULL")
    assert named == [(True,)]
    assert run.q("SELECT count(*) FROM mpi_calls WHERE datatype IS NOT NULL AND len(type_ids) <> 1") == [(0,)]
    # the communicators made: their MPI_COMM_WORLD ranks in their order, and their ids on the calls on them
    made = run.q("SELECT rank, comm_size, members, comm_id FROM mpi_calls WHERE func = 'MPI_Comm_split' "
                 "ORDER BY rank, t_start")
    assert [row[:3] for row in made] == [(0, 2, [1, 0]), (0, 1, [0]), (1, 2, [1, 0])]
    barriers = run.q("SELECT rank, comm_id FROM mpi_calls WHERE func = 'MPI_Barrier' ORDER BY rank, t_start")
    assert barriers[1] == (0, made[0][3]) and barriers[3] == (1, made[0][3]) != (1, barriers[2][1])
    assert run.stats["findings"]["error"] == 0  # (the checks take the point-to-point calls for no barrier)
