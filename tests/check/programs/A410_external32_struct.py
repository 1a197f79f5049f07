"""A410: a view in external32 whose filetype is a struct (byte displacements: not portable), and a
clean one of a vector of ints (portable)."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/a410", MPI.MODE_CREATE | MPI.MODE_RDWR)
portable = MPI.INT.Create_vector(2, 1, 2).Commit()
fh.Set_view(0, MPI.INT, portable, "external32")
record = MPI.Datatype.Create_struct([1, 1], [0, 4], [MPI.INT, MPI.INT]).Commit()
fh.Set_view(0, MPI.INT, record, "external32")
for t in (portable, record):
    t.Free()
fh.Close()
