"""D501: MPI_File_set_size grows a new, empty file to 4 KiB; rank 1 then reads bytes of the new
region, which nobody wrote (their values are undefined)."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/d501", MPI.MODE_CREATE | MPI.MODE_RDWR)
fh.Set_size(4096)
if comm.Get_rank() == 1:
    fh.Read_at(1024, bytearray(16))
fh.Close()
