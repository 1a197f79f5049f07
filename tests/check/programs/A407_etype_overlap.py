"""A407 (MARMOT 5.3): a file opened for writing gets a view whose etype holds bytes 2-3 twice (blocks
[0, 4) and [2, 6)); the filetype, 8 contiguous bytes, overlaps nothing."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/a407-etype", MPI.MODE_CREATE | MPI.MODE_RDWR)
etype = MPI.BYTE.Create_hindexed([4, 4], [0, 2]).Commit()
filetype = MPI.BYTE.Create_contiguous(8).Commit()
fh.Set_view(0, etype, filetype)
etype.Free()
filetype.Free()
fh.Close()
