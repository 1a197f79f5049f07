"""D503: atomic mode on, both ranks write 4 bytes at once, rank 0 at bytes 0-3 and rank 1 at bytes 2-5,
with nothing ordering them: sequentially consistent, but which write comes first (bytes 2-3) is
undefined."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
fh = MPI.File.Open(comm, "/pvfs2/d503", MPI.MODE_CREATE | MPI.MODE_RDWR)
fh.Set_atomicity(True)
fh.Write_at(2 * rank, bytes([65 + rank]) * 4)
fh.Close()
