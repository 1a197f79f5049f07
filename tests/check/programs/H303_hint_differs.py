"""H303: the ranks pass different striping_unit hints to one MPI_File_open.

(Only rank 0 creates the file, with its own value, so the open completes.)"""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
info = MPI.Info.Create()
info.Set("striping_unit", str(65536 * (comm.Get_rank() + 1)))
fh = MPI.File.Open(comm, "/pvfs2/h303", MPI.MODE_CREATE | MPI.MODE_RDWR, info)
info.Free()
fh.Write_at(comm.Get_rank() * 4, b"abcd")
fh.Close()
