"""H301: the open passes a hint key the MPI standard does not reserve (``app_io_mode``)."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
info = MPI.Info.Create()
info.Set("app_io_mode", "fast")
fh = MPI.File.Open(comm, "/pvfs2/h301", MPI.MODE_CREATE | MPI.MODE_RDWR, info)
info.Free()
fh.Write_at(comm.Get_rank() * 4, b"abcd")
fh.Close()
