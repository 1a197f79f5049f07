"""S803: one independent write per rank through a strided view of many small blocks: run with
``--strip-size 56KiB`` (16 blocks of 3.5 KiB per strip, 2 I/O servers).

Rank r's view holds blocks r, r + ranks, r + 2 x ranks, ... of 3584 bytes; it writes 256 of them with
one MPI_File_write_at.  Each I/O server gets 128 of its blocks: 2 requests of at most 64 regions, each
a flow of 224 KiB: 3 full 64 KiB buffers and a 32 KiB one."""

from mpi4py import MPI

BLOCK = 3584
BLOCKS = 256

comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()
fh = MPI.File.Open(comm, "/pvfs2/s803", MPI.MODE_CREATE | MPI.MODE_WRONLY)
filetype = MPI.BYTE.Create_vector(BLOCKS, BLOCK, BLOCK * nranks).Commit()
fh.Set_view(rank * BLOCK, MPI.BYTE, filetype)
fh.Write_at(0, bytes([rank + 1]) * (BLOCK * BLOCKS))
fh.Close()
filetype.Free()
