"""Two ranks write 4 KiB blocks of one shared file independently, 512 bytes off the strips: rank 0
writes 2500 blocks in descending order (each after the first is random), rank 1 writes 600 blocks
in ascending order (consecutive).  Drishti's client-side triggers: small, misaligned, random,
independent requests, and ranks moving different amounts of data."""

from mpi4py import MPI

BLOCK, SHIFT, BLOCKS = 4096, 512, (2500, 600)

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
fh = MPI.File.Open(comm, "/pvfs2/patterns", MPI.MODE_WRONLY | MPI.MODE_CREATE)
data = bytes([rank + 1]) * BLOCK
if rank == 0:
    order = range(BLOCKS[0] - 1, -1, -1)
    base = SHIFT
else:
    order = range(BLOCKS[1])
    base = SHIFT + BLOCKS[0] * BLOCK
for i in order:
    fh.Write_at(base + i * BLOCK, data)
fh.Close()
