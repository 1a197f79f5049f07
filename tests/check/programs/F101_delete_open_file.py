"""F101: rank 1 deletes a file that both ranks still have open (they close it afterwards), under
another spelling of its name than the open's (ROMIO's prefix, as in the thesis' demo: one file)."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "pvfs2://pvfs2/f101", MPI.MODE_CREATE | MPI.MODE_RDWR)
fh.Write_at(comm.Get_rank() * 4, b"abcd")
comm.Barrier()
if comm.Get_rank() == 1:
    MPI.File.Delete("/pvfs2//./f101")
comm.Barrier()
fh.Close()
