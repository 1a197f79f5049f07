"""E601: both ranks open a file that does not exist, without MODE_CREATE (MPI_ERR_NO_SUCH_FILE), and go on."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
try:
    MPI.File.Open(comm, "/pvfs2/e601", MPI.MODE_RDONLY)
except MPI.Exception as exc:
    assert exc.Get_error_class() == MPI.ERR_NO_SUCH_FILE
comm.Barrier()
