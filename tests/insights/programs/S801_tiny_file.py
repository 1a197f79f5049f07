"""S801: a file too small to spread over the I/O servers (run with ``--servers 4``): 512 bytes, one strip
of one server; no strip size callid takes (256 B at least) would put a piece on each of 4 servers."""

from mpi4py import MPI

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/s801_tiny", MPI.MODE_CREATE | MPI.MODE_WRONLY)
if comm.Get_rank() == 0:
    fh.Write_at(0, b"t" * 512)
fh.Close()
