"""P710: every rank writes its own block of ``BLOCK`` bytes ``TIMES`` times in place (a checkpoint
rewritten each step): each byte written ``TIMES`` times, by the same rank."""

from mpi4py import MPI

BLOCK, TIMES = 64 * 1024, 3

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/rewrite", MPI.MODE_CREATE | MPI.MODE_WRONLY)
for step in range(TIMES):
    fh.Write_at(comm.Get_rank() * BLOCK, bytes([65 + step]) * BLOCK)
fh.Close()
