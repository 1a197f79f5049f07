"""Data representations (MPI 3.1 13.5): native and internal as in memory, external32 in MPI's portable form,
converted by callid's MPI-IO as MPICH's ROMIO converts (checked against MPI_Pack_external and against the
bytes MPICH writes)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from mpi4py import MPI

from callid.mpiio.datarep import Conversion, UnsupportedType
from tests.conftest import callid_cmd

PROGRAM = __file__.replace("test_datarep.py", "external32_program.py")


def test_external32_is_mpi_pack_external_of_each_element_in_typemap_order():
    ints = np.arange(5, dtype="i4") - 2
    ref = bytearray(MPI.INT.Pack_external_size("external32", 5))
    MPI.INT.Pack_external("external32", ints, ref, 0)
    assert bytes(Conversion(MPI.INT).apply(ints.tobytes())) == bytes(ref)
    mixed = MPI.Datatype.Create_struct([1, 2], [0, 8], [MPI.INT, MPI.DOUBLE]).Commit()
    three = mixed.Create_contiguous(3).Commit()
    packed = struct.pack("<idd", 7, 1.5, -2.0) * 3  # (three elements, packed: no padding)
    external = Conversion(three).apply(packed)
    assert bytes(external) == struct.pack(">idd", 7, 1.5, -2.0) * 3
    assert bytes(Conversion(three).undo(bytes(external))) == packed
    assert Conversion(MPI.BYTE).identity and not Conversion(MPI.DOUBLE).identity
    for unsupported in (MPI.LONG, MPI.LONG_DOUBLE):  # (4 bytes in external32; x87's 80 bits, not IEEE's)
        with pytest.raises(UnsupportedType):
            Conversion(unsupported)
    three.Free()
    mixed.Free()


@pytest.mark.mpi
@pytest.mark.parametrize("where", ["/pvfs2/x32", "real"])
def test_an_external32_view_stores_big_endian_on_both_mpi_io_paths(tmp_path, where):
    """On callid's file system (callid's MPI-IO) and on a real file (MPICH's ROMIO): the same program's
    assertions hold, the same bytes, the same refusal of MPI_LONG where callid converts."""
    target = where if where.startswith("/pvfs2") else str(tmp_path / "x32.dat")
    run = callid_cmd("run", "-n", 2, "-d", tmp_path / "out", PROGRAM, target)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "ok" in run.stdout
    refused = "refused: " in run.stdout
    assert refused == where.startswith("/pvfs2")
    if not refused:
        with open(target, "rb") as f:
            assert f.read(32) == struct.pack(">8i", *range(4), *range(100, 104))
