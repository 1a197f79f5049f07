"""F102: rank 0 starts a non-blocking write on a file of its own and ends without waiting for it or
closing the file (MARMOT 5.2: the finding names the request never completed, not only the open)."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
if comm.Get_rank() == 0:
    fh = MPI.File.Open(MPI.COMM_SELF, "/pvfs2/f102-pending", MPI.MODE_CREATE | MPI.MODE_RDWR)
    request = fh.Iwrite_at(0, b"abcd")
comm.Barrier()
