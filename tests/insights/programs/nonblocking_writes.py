"""Non-blocking writes, blocking reads: Drishti's M07 does not apply, M06 does (P714 warns of the reads).

Each rank writes 4 blocks of 64 KiB with MPI_File_Iwrite_at (waited for together), then reads them
back with MPI_File_Read_at."""

from __future__ import annotations

from mpi4py import MPI

BLOCK, BLOCKS = 64 * 1024, 4
comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()
fh = MPI.File.Open(comm, "/pvfs2/nonblocking", MPI.MODE_CREATE | MPI.MODE_RDWR)
data = bytes([rank + 1]) * BLOCK
MPI.Request.Waitall([fh.Iwrite_at((i * nranks + rank) * BLOCK, data) for i in range(BLOCKS)])
back = bytearray(BLOCK)
for i in range(BLOCKS):
    fh.Read_at((i * nranks + rank) * BLOCK, back)
    assert back == data
fh.Close()
