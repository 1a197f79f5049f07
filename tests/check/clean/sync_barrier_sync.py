"""Clean for D502: each rank writes its own 4 bytes of a file, then MPI_File_sync, MPI_Barrier,
MPI_File_sync, and reads the other rank's 4 bytes: MPI 3.1 13.6.1's sync-barrier-sync.

Done twice: on the simulated file system, and on a file of the MPI library's own MPI-IO (where
MPI_File_sync need not synchronise, so only the barrier orders the accesses).  With ``--no-barrier``
the barrier is left out: the accesses to the library's file race (D502); those to the simulated one
do not, its MPI_File_sync ends in a barrier of the file's group."""

import os
import sys
import tempfile

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
barrier = "--no-barrier" not in sys.argv
real_dir = comm.bcast(tempfile.mkdtemp(prefix="callid-sbs-") if rank == 0 else None)
for name in ("/pvfs2/sync_barrier_sync", os.path.join(real_dir, "sync_barrier_sync")):
    fh = MPI.File.Open(comm, name, MPI.MODE_CREATE | MPI.MODE_RDWR)
    fh.Write_at(4 * rank, bytes([65 + rank]) * 4)
    fh.Sync()
    if barrier:
        comm.Barrier()
    fh.Sync()
    buf = bytearray(4)
    fh.Read_at(4 * (1 - rank), buf)
    fh.Close()
    if barrier:
        assert buf == bytes([66 - rank]) * 4, (name, buf)
comm.Barrier()
if rank == 0:
    MPI.File.Delete(os.path.join(real_dir, "sync_barrier_sync"))
    os.rmdir(real_dir)
