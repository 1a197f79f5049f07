"""S804: writes of 1 MiB each, moved by the servers in 64 KiB flow buffers (the default --flow-buffer):
16 disk operations per request.

Rank r writes its blocks i = 0..3 at (i x ranks + r) MiB."""

from mpi4py import MPI

SIZE = 1 << 20
BLOCKS = 4

comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()
fh = MPI.File.Open(comm, "/pvfs2/s804", MPI.MODE_CREATE | MPI.MODE_WRONLY)
for i in range(BLOCKS):
    fh.Write_at((i * nranks + rank) * SIZE, bytes([rank + 1]) * SIZE)
fh.Close()
