"""S807: rank 0 writes a file of ``SIZE`` bytes, then every rank reads all of it independently
(MPI_File_read_at): the servers read each byte from disk once per rank.  ``shifted``: rank r reads
``SHIFTED_LEN`` bytes from ``r * SHIFTED_STEP`` instead (ranges that overlap in part, not on strip bounds)."""

import sys

from mpi4py import MPI

SIZE = 1 << 20
SHIFTED_STEP, SHIFTED_LEN = 100_000, 300_000

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/reread", MPI.MODE_CREATE | MPI.MODE_RDWR)
if comm.Get_rank() == 0:
    fh.Write_at(0, b"x" * SIZE)
comm.Barrier()
offset, length = (comm.Get_rank() * SHIFTED_STEP, SHIFTED_LEN) if sys.argv[1:] == ["shifted"] else (0, SIZE)
buf = bytearray(length)
fh.Read_at(offset, buf)
assert buf == b"x" * length
fh.Close()
