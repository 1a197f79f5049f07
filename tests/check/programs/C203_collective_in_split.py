"""C203: between MPI_File_write_at_all_begin and its _end every rank calls MPI_File_read_at_all on the
same handle (reading back its own earlier bytes, so no two ranks' accesses conflict)."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
fh = MPI.File.Open(comm, "/pvfs2/c203", MPI.MODE_CREATE | MPI.MODE_RDWR)
fh.Write_at(rank * 4, b"abcd")
fh.Write_at_all_begin(8 + rank * 4, b"efgh")
buf = bytearray(4)
fh.Read_at_all(rank * 4, buf)
fh.Write_at_all_end(b"efgh")
fh.Close()
