"""A408: rank 1 sets a view at displacement 16, rank 0 at 0, then both write with the shared file
pointer (MARMOT 5.4: shared file pointer calls need the same view on every rank).  After a second
set_view, the same on both ranks, their shared file pointer calls are fine."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/a408", MPI.MODE_CREATE | MPI.MODE_RDWR)
fh.Set_view(16 * comm.Get_rank(), MPI.BYTE, MPI.BYTE)
fh.Write_shared(b"abcd")
comm.Barrier()
fh.Set_view(0, MPI.BYTE, MPI.INT)
fh.Write_ordered(bytearray(8))
fh.Close()
