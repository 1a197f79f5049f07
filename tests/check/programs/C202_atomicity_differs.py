"""C202: rank 0 sets atomic mode on, rank 1 off (MARMOT 5.6: set_atomicity's flag must be the same on
all processes)."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
fh = MPI.File.Open(comm, "/pvfs2/c202-atomic", MPI.MODE_CREATE | MPI.MODE_RDWR)
fh.Set_atomicity(rank == 0)
fh.Write_at(rank * 4, b"abcd")
fh.Close()
