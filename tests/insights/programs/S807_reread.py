"""S807: rank 0 writes a file of ``SIZE`` bytes, then every rank reads all of it independently
(MPI_File_read_at): the servers read each byte from disk once per rank."""

from mpi4py import MPI

SIZE = 1 << 20

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/reread", MPI.MODE_CREATE | MPI.MODE_RDWR)
if comm.Get_rank() == 0:
    fh.Write_at(0, b"x" * SIZE)
comm.Barrier()
buf = bytearray(SIZE)
fh.Read_at(0, buf)
assert buf == b"x" * SIZE
fh.Close()
