"""A402: the ranks set a view at displacement 0 on a file opened MODE_SEQUENTIAL, where only
MPI_DISPLACEMENT_CURRENT is allowed (MARMOT 5.3; the call fails, as ROMIO fails it)."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/a402-view", MPI.MODE_CREATE | MPI.MODE_WRONLY | MPI.MODE_SEQUENTIAL)
try:
    fh.Set_view(0, MPI.BYTE, MPI.BYTE)
except MPI.Exception:
    pass
fh.Set_view(MPI.DISPLACEMENT_CURRENT, MPI.BYTE, MPI.BYTE)  # (as the standard asks: no finding)
fh.Write_ordered(b"abcd")
fh.Close()
