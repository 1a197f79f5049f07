"""C202: the ranks open one file with different access modes (rank 0 adds MPI_MODE_CREATE)."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
amode = MPI.MODE_RDWR | (MPI.MODE_CREATE if rank == 0 else 0)
fh = MPI.File.Open(comm, "/pvfs2/c202", amode)
fh.Write_at(rank * 4, b"abcd")
fh.Close()
