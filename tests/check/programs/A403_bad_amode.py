"""A403: the ranks open a file MODE_RDONLY | MODE_CREATE, an illegal combination (the open fails
on every rank)."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
try:
    fh = MPI.File.Open(comm, "/pvfs2/a403", MPI.MODE_RDONLY | MPI.MODE_CREATE)
    fh.Close()
except MPI.Exception:
    pass
