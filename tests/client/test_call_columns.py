"""What HDTrace's wrapper records of a call beside its data, on callid's own MPI-IO: the rank's thread
that made it, a seek's offset as passed and where the pointer moved, a file's size at open, and the
free of a group MPI_File_get_group returned (on the simulated file system and the real one alike)."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.conftest import cli, traced

pytestmark = pytest.mark.mpi

PROGRAM = textwrap.dedent("""
    import sys, threading
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    for path in ("/pvfs2/columns", sys.argv[1]):
        fh = MPI.File.Open(comm, path, MPI.MODE_CREATE | MPI.MODE_RDWR)
        comm.Barrier()  # (each size at open taken before a rank writes: a real MPI-IO open need not wait)
        fh.Write_at(comm.rank * 100, b"x" * 100)
        other = threading.Thread(target=lambda: fh.Write_at(1000 + comm.rank * 10, b"y" * 10))
        other.start(); other.join()
        fh.Set_view(0, MPI.INT, MPI.INT)
        fh.Seek(7, MPI.SEEK_SET)
        fh.Get_group().Free()
        fh.Close()
        fh = MPI.File.Open(comm, path, MPI.MODE_RDONLY)
        kept = fh.Get_group()
        fh.Close()
""")


def test_thread_seek_size_at_open_and_group_frees_are_logged(tmp_path):
    (tmp_path / "columns.py").write_text(PROGRAM)
    run = traced(tmp_path, "out", "-n", 2, "--servers", 2, tmp_path / "columns.py", tmp_path / "real")
    for file in ("/pvfs2/columns", str(tmp_path / "real")):
        calls = run.q(f"SELECT rank, func, thread, relative_offset, whence, file_offset, file_size "
                      f"FROM calls WHERE file = '{file}' ORDER BY rank, t_start")
        for rank in (0, 1):
            mine = [c[1:] for c in calls if c[0] == rank]
            # the write of the second thread is thread 1's; every other call the main thread's
            assert [c[1] for c in mine if c[0] == "MPI_File_write_at"] == [0, 1]
            assert {c[1] for c in mine if c[0] != "MPI_File_write_at"} == {0}
            (seek,) = [c[2:5] for c in mine if c[0] == "MPI_File_seek"]
            assert seek == (7, "SET", 28)  # 7 ints of the view: byte 28
            assert [c[5] for c in mine if c[0] == "MPI_File_open"] == [0, 1020], file  # (created, then whole)
    frees = run.q("SELECT rank, collective, t_start <= t_end FROM mpi_calls WHERE func = 'MPI_Group_free' "
                  "ORDER BY rank")
    assert frees == [(0, False, True)] * 2 + [(1, False, True)] * 2  # (one per rank and file)
    found = json.loads(cli("check", run.db, "--json", "--code", "F104").stdout)["findings"]
    (f104,) = found
    assert f104["ranks"] == [0, 1] and f104["detail"].startswith("4 of the 8 groups")
