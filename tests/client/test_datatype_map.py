"""HDTrace's datatype map on callid's own MPI-IO: each datatype of a rank's MPI-IO calls logged once, at
its first use, with its combiner, constructor arguments and parts (``datatypes``), and each call naming
its types by id (``calls.type_ids``)."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import traced

pytestmark = pytest.mark.mpi

PROGRAM = textwrap.dedent("""
    import numpy as np
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    fh = MPI.File.Open(comm, "/pvfs2/types", MPI.MODE_CREATE | MPI.MODE_RDWR)
    filetype = MPI.INT.Create_vector(2, 1, 3).Commit()
    fh.Set_view(comm.rank * 4, MPI.INT, filetype)
    pair = MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.INT, MPI.DOUBLE]).Commit()
    buf = np.zeros(4, "f8")
    fh.Write_all([buf, 1, pair])
    fh.Write_all([buf, 1, pair])  # (the same types: logged once)
    fh.Read_at_all(0, np.zeros(2, "i4"))
    fh.Close()
""")


def test_each_datatype_is_logged_once_with_its_constructor(tmp_path):
    (tmp_path / "types.py").write_text(PROGRAM)
    run = traced(tmp_path, "out", "-n", 2, tmp_path / "types.py")
    types = run.q("SELECT rank, type_id, func, datatype, size, extent, integers, addresses, types "
                  "FROM datatypes ORDER BY rank, type_id")
    mine = [
        (1, "MPI_COMBINER_NAMED", "MPI_INT", 4, 4, [], [], []),
        (2, "MPI_COMBINER_VECTOR", "vector(MPI_INT)", 8, 16, [2, 1, 3], [], [1]),
        (3, "MPI_COMBINER_NAMED", "MPI_DOUBLE", 8, 8, [], [], []),
        (4, "MPI_COMBINER_STRUCT", "struct(MPI_INT,MPI_DOUBLE)", 12, 16, [2, 1, 1], [0, 8], [1, 3]),
    ]
    assert types == [(rank, *row) for rank in (0, 1) for row in mine]
    calls = run.q("SELECT func, type_ids FROM calls WHERE rank = 0 AND len(type_ids) > 0 ORDER BY t_start")
    assert calls == [("MPI_File_set_view", [1, 2]), ("MPI_File_write_all", [4]), ("MPI_File_write_all", [4]),
                     ("MPI_File_read_at_all", [1])]
