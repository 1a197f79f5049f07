"""S806: four ranks write collectively through a vector view that leaves holes: each stride of
``2 * nranks * BLOCK`` bytes holds one ``BLOCK`` of each rank (rank r at ``r * BLOCK``) and then a
hole as long, so the aggregator reads each cycle's extent back before writing it whole
(read-modify-write).  With the argument ``disable`` (hint romio_cb_write=disable) each rank writes
its blocks itself, with list I/O: nothing is read back."""

import sys

from mpi4py import MPI

BLOCK, BLOCKS = 16384, 8

comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()
info = MPI.Info.Create()
if sys.argv[1:] == ["disable"]:
    info.Set("romio_cb_write", "disable")
fh = MPI.File.Open(comm, "/pvfs2/holes", MPI.MODE_CREATE | MPI.MODE_WRONLY, info)
filetype = MPI.BYTE.Create_vector(BLOCKS, BLOCK, 2 * nranks * BLOCK).Commit()
fh.Set_view(rank * BLOCK, MPI.BYTE, filetype)
fh.Write_all(bytes([rank + 1]) * (BLOCK * BLOCKS))
filetype.Free()
fh.Close()
info.Free()
