"""A402: rank 0 asks for its individual file pointer (MPI_File_get_position) on a file opened
MODE_SEQUENTIAL, where only the shared file pointer may be used."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/a402", MPI.MODE_CREATE | MPI.MODE_WRONLY | MPI.MODE_SEQUENTIAL)
fh.Write_ordered(b"abcd")
if comm.Get_rank() == 0:
    fh.Get_position()
fh.Close()
