"""A401: rank 0 reads from a file it opened MODE_WRONLY (the file system rejects the read)."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/a401", MPI.MODE_CREATE | MPI.MODE_WRONLY)
fh.Write_at(comm.Get_rank() * 4, b"abcd")
if comm.Get_rank() == 0:
    buf = bytearray(4)
    try:
        fh.Read_at(0, buf)
    except MPI.Exception:
        pass
fh.Close()
