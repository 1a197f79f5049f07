"""D502: rank 0 writes bytes 0-7 of a file, rank 1 then writes bytes 4-11 of it: a barrier orders
them in time, but without MPI_File_sync before and after it (nonatomic mode) the overlapping bytes
4-7 are a consistency race."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/d502", MPI.MODE_CREATE | MPI.MODE_RDWR)
if comm.Get_rank() == 0:
    fh.Write_at(0, b"01234567")
comm.Barrier()
if comm.Get_rank() == 1:
    fh.Write_at(4, b"abcdefgh")
fh.Close()
