"""Writes ints through an external32 view and reads them back (same values), reads the same bytes
through a native view (big-endian: MPI's portable form), and asks for MPI_LONG in external32 (4 bytes
there, 8 here: refused by callid's MPI-IO, taken by MPICH's ROMIO); prints ok."""

import struct
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.rank
fh = MPI.File.Open(comm, sys.argv[1], MPI.MODE_CREATE | MPI.MODE_RDWR)
fh.Set_view(0, MPI.INT, MPI.INT, "external32")
data = np.arange(4, dtype="i4") + 100 * rank
fh.Write_at(4 * rank, data)
fh.Sync()
comm.Barrier()
fh.Sync()
back = np.zeros(4, "i4")
fh.Read_at(4 * rank, back)
assert (back == data).all(), back
fh.Set_view(0, MPI.BYTE, MPI.BYTE, "native")
raw = bytearray(16)
fh.Read_at(16 * rank, raw)
assert bytes(raw) == struct.pack(">4i", *data), bytes(raw).hex()
try:
    fh.Set_view(0, MPI.LONG, MPI.LONG, "external32")
except MPI.Exception as exc:
    assert exc.Get_error_class() == MPI.ERR_UNSUPPORTED_DATAREP, exc
    if rank == 0:
        print("refused:", exc.Get_error_string())
fh.Set_view(0, MPI.INT, MPI.INT, "internal")
fh.Close()
if rank == 0:
    print("ok")
