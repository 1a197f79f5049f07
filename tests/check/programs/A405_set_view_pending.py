"""A405: rank 1 sets a new view while its MPI_File_iwrite_at is still pending (it waits afterwards)."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
fh = MPI.File.Open(comm, "/pvfs2/a405", MPI.MODE_CREATE | MPI.MODE_RDWR)
request = fh.Iwrite_at(rank * 4, b"abcd")
if rank == 1:
    fh.Set_view(0, MPI.BYTE, MPI.BYTE)
    request.Wait()
else:
    request.Wait()
    fh.Set_view(0, MPI.BYTE, MPI.BYTE)
fh.Close()
