"""A404: rank 0 writes at explicit offset -4 (the file system rejects it)."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/a404", MPI.MODE_CREATE | MPI.MODE_RDWR)
fh.Write_at(comm.Get_rank() * 4, b"abcd")
if comm.Get_rank() == 0:
    try:
        fh.Write_at(-4, b"abcd")
    except MPI.Exception:
        pass
fh.Close()
