"""A411 (MARMOT 5.4): a read into a buffer whose datatype has two blocks sharing bytes 4-7; the write
from a buffer of the same datatype before it is correct (data may be taken twice from one place)."""

import numpy as np
from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/a411", MPI.MODE_CREATE | MPI.MODE_RDWR)
twice = MPI.BYTE.Create_indexed([8, 8], [0, 4]).Commit()  # bytes 0-7 and 4-11: 16 bytes of data
buf = np.arange(12, dtype=np.uint8)
fh.Write_at(comm.rank * 16, [buf, 1, twice])
fh.Read_at(comm.rank * 16, [buf, 1, twice])
twice.Free()
fh.Close()
