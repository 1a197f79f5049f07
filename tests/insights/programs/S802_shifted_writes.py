"""S802: writes of one strip (64 KiB) at offsets shifted by 4 KiB from the strip boundaries, each
touching two strips, next to as many aligned writes of the same size.

Rank r writes its blocks i = 0..7 at (i x ranks + r) x 64 KiB + 4 KiB, then at 4 MiB + (i x ranks + r)
x 64 KiB."""

from mpi4py import MPI

STRIP = 64 * 1024
BLOCKS = 8

comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()
data = bytes([rank + 1]) * STRIP
fh = MPI.File.Open(comm, "/pvfs2/s802", MPI.MODE_CREATE | MPI.MODE_WRONLY)
for i in range(BLOCKS):
    fh.Write_at((i * nranks + rank) * STRIP + 4096, data)
for i in range(BLOCKS):
    fh.Write_at((1 << 22) + (i * nranks + rank) * STRIP, data)
fh.Close()
