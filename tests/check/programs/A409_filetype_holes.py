"""A409: a view of etype MPI_INT whose filetype has a hole of 2 bytes (ints at bytes 0 and 6): its size,
8 bytes, is whole ints, so the MPI library takes it."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/a409", MPI.MODE_CREATE | MPI.MODE_RDWR)
filetype = MPI.INT.Create_hindexed([1, 1], [0, 6]).Commit()
fh.Set_view(0, MPI.INT, filetype)
filetype.Free()
fh.Close()
