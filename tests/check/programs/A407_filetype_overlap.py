"""A407: a file opened for writing gets a view whose filetype's two blocks overlap ([0, 8) and
[4, 12))."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/a407", MPI.MODE_CREATE | MPI.MODE_RDWR)
filetype = MPI.BYTE.Create_hindexed([8, 8], [0, 4]).Commit()
try:
    fh.Set_view(0, MPI.BYTE, filetype)
except MPI.Exception:
    pass
filetype.Free()
fh.Close()
