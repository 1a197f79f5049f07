"""Clean for D502: atomic mode on (MPI_File_set_atomicity), both ranks write 4 bytes at once, rank 0
at bytes 0-3 and rank 1 at bytes 2-5, with no sync between: in atomic mode the two writes are
sequentially consistent (MPI 3.1 13.6.1), so there is no race.  With ``--nonatomic`` the mode is not
set: the overlapping bytes 2-3 race (D502)."""

import sys

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
fh = MPI.File.Open(comm, "/pvfs2/atomic_mode", MPI.MODE_CREATE | MPI.MODE_RDWR)
if "--nonatomic" not in sys.argv:
    fh.Set_atomicity(True)
fh.Write_at(2 * rank, bytes([65 + rank]) * 4)
fh.Close()
