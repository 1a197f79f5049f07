"""C202: the ranks open "one" file under different names (MARMOT 5.1: arguments of a collective that
must be the same on all processes)."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
fh = MPI.File.Open(comm, f"/pvfs2/c202-{rank}", MPI.MODE_CREATE | MPI.MODE_RDWR)
fh.Write_at(rank * 4, b"abcd")
fh.Close()
