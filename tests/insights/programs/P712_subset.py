"""P712: 3 ranks; ranks 0 and 1 share a file on their own communicator, rank 0 writing 4 blocks of
``BLOCK`` bytes and rank 1 one; rank 2 writes a file of its own."""

from mpi4py import MPI

BLOCK = 64 * 1024

world = MPI.COMM_WORLD
rank = world.Get_rank()
pair = world.Split(0 if rank < 2 else 1, rank)
fh = MPI.File.Open(pair, "/pvfs2/pair" if rank < 2 else "/pvfs2/alone", MPI.MODE_CREATE | MPI.MODE_WRONLY)
blocks = {0: 4, 1: 1, 2: 2}[rank]
for i in range(blocks):
    fh.Write_at((i * 2 + rank % 2) * BLOCK, b"x" * BLOCK)
fh.Close()
pair.Free()
