"""A412 (MARMOT 5.3): a filetype built from an absolute address (MPI_Get_address of a buffer, as a
program builds a memory datatype for MPI_BOTTOM) used as a view; the view is never written through
(its file offsets would be that address)."""

import numpy as np
from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/a412", MPI.MODE_CREATE | MPI.MODE_RDWR)
buf = np.zeros(16, dtype=np.int32)
address = MPI.Get_address(buf)
filetype = MPI.INT.Create_hindexed([4], [address]).Commit()
fh.Set_view(0, MPI.INT, filetype)
filetype.Free()
fh.Close()
