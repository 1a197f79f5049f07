"""C202: the ranks resize the file, and preallocate it, to different sizes (MARMOT 5.2: set_size's and
preallocate's size must be the same on all processes)."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
fh = MPI.File.Open(comm, "/pvfs2/c202-size", MPI.MODE_CREATE | MPI.MODE_RDWR)
fh.Set_size(4096 * (rank + 1))
fh.Preallocate(8192 + rank)
fh.Close()
