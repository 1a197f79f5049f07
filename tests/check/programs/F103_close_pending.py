"""F103: rank 0 closes the file before waiting for its MPI_File_iwrite_at (it waits after the close)."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/f103", MPI.MODE_CREATE | MPI.MODE_RDWR)
if comm.Get_rank() == 0:
    request = fh.Iwrite_at(0, b"abcd")
    fh.Close()
    request.Wait()
else:
    fh.Write_at(4, b"efgh")
    fh.Close()
