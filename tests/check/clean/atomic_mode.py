"""Clean for D502 and D503: atomic mode on (MPI_File_set_atomicity), rank 0 writes 4 bytes at bytes
0-3, then (after a barrier) rank 1 at bytes 2-5, with no sync between: in atomic mode the two writes
are sequentially consistent (MPI 3.1 13.6.1) and the barrier orders them, so there is no race.
``--unordered``: no barrier (which write comes first is undefined: D503, a warning); ``--nonatomic``:
the mode is not set either, and the overlapping bytes 2-3 race (D502)."""

import sys

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
fh = MPI.File.Open(comm, "/pvfs2/atomic_mode", MPI.MODE_CREATE | MPI.MODE_RDWR)
if "--nonatomic" not in sys.argv:
    fh.Set_atomicity(True)
ordered = not {"--unordered", "--nonatomic"} & set(sys.argv)
if ordered and rank == 1:
    comm.Barrier()
fh.Write_at(2 * rank, bytes([65 + rank]) * 4)
if ordered and rank == 0:
    comm.Barrier()
fh.Close()
