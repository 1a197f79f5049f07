"""C201: rank 0 calls MPI_File_set_size then MPI_File_preallocate, rank 1 the other way round.

(Both broadcast their outcome from rank 0 inside, so the run does not hang: the calls match up
in MPI terms and only their order is wrong.)"""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/c201", MPI.MODE_CREATE | MPI.MODE_RDWR)
fh.Write_at(comm.Get_rank() * 4, b"abcd")
if comm.Get_rank() == 0:
    fh.Set_size(8)
    fh.Preallocate(16)
else:
    fh.Preallocate(16)
    fh.Set_size(8)
fh.Close()
