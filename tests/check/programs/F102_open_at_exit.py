"""F102: rank 1 opens a file of its own and never closes it."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
if comm.Get_rank() == 1:
    fh = MPI.File.Open(MPI.COMM_SELF, "/pvfs2/f102", MPI.MODE_CREATE | MPI.MODE_RDWR)
    fh.Write_at(0, b"abcd")
comm.Barrier()
