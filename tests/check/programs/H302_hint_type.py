"""H302: cb_buffer_size (an integer hint) is passed as ``4MB``, the same on every rank."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
info = MPI.Info.Create()
info.Set("cb_buffer_size", "4MB")
fh = MPI.File.Open(comm, "/pvfs2/h302", MPI.MODE_CREATE | MPI.MODE_RDWR, info)
info.Free()
fh.Write_at(comm.Get_rank() * 4, b"abcd")
fh.Close()
