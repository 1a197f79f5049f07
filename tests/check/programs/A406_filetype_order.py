"""A406: the filetype of a view lists its blocks out of order (displacements 8 then 0)."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/a406", MPI.MODE_CREATE | MPI.MODE_RDWR)
filetype = MPI.BYTE.Create_hindexed([4, 4], [8, 0]).Commit()
try:
    fh.Set_view(0, MPI.BYTE, filetype)
except MPI.Exception:
    pass
filetype.Free()
fh.Close()
