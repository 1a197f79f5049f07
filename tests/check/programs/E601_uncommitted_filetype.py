"""E601 (MARMOT 5.3): a view's filetype never committed (MPI_Type_commit): the MPI library refuses the
set_view with MPI_ERR_TYPE, as MPICH's ROMIO does; then a write from a buffer of an uncommitted datatype,
refused alike."""

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/e601-types", MPI.MODE_CREATE | MPI.MODE_RDWR)
filetype = MPI.INT.Create_vector(2, 1, 2)  # (not committed)
try:
    fh.Set_view(0, MPI.INT, filetype)
except MPI.Exception as exc:
    assert exc.Get_error_class() == MPI.ERR_TYPE
memtype = MPI.BYTE.Create_contiguous(8)  # (not committed)
try:
    fh.Write_at(comm.rank * 8, [bytearray(8), 1, memtype])
except MPI.Exception as exc:
    assert exc.Get_error_class() == MPI.ERR_TYPE
filetype.Free()
memtype.Free()
fh.Close()
