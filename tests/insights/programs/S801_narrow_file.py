"""S801: one file striped over a single I/O server (the striping_factor=1 open hint) next to one striped
over all of them: run with ``--servers 4``.

Every rank writes 256 KiB at offset rank x 256 KiB to each file: the wide file puts 256 KiB on every
server, the narrow one all of its bytes on one."""

from mpi4py import MPI

BLOCK = 256 * 1024

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
data = bytes([rank + 1]) * BLOCK
wide = MPI.File.Open(comm, "/pvfs2/s801_wide", MPI.MODE_CREATE | MPI.MODE_WRONLY)
wide.Write_at(rank * BLOCK, data)
wide.Close()
info = MPI.Info.Create()
info.Set("striping_factor", "1")
narrow = MPI.File.Open(comm, "/pvfs2/s801_narrow", MPI.MODE_CREATE | MPI.MODE_WRONLY, info)
info.Free()
narrow.Write_at(rank * BLOCK, data)
narrow.Close()
