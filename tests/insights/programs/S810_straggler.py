"""S810: two ranks write ``CALLS`` blocks of ``BLOCK`` bytes each (MPI_File_write_at) to a file
striped over one I/O server; then rank 1 writes one more block of the same size through a view of
``PIECE``-byte pieces with gaps between them: the same call and size as its peers, but hundreds of
requests and disk operations on the server instead of one."""

from mpi4py import MPI

BLOCK, CALLS, PIECE = 65536, 8, 4

comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()
info = MPI.Info.Create()
info.Set("striping_factor", "1")
path = "/pvfs2/straggler"
fh = MPI.File.Open(comm, path, MPI.MODE_CREATE | MPI.MODE_WRONLY, info)
data = bytes([rank + 1]) * BLOCK
for i in range(CALLS):
    fh.Write_at((i * nranks + rank) * BLOCK, data)
comm.Barrier()
if rank == 1:
    sparse = MPI.File.Open(MPI.COMM_SELF, path, MPI.MODE_WRONLY)
    filetype = MPI.BYTE.Create_vector(BLOCK // PIECE, PIECE, 2 * PIECE).Commit()
    sparse.Set_view(CALLS * nranks * BLOCK, MPI.BYTE, filetype)
    sparse.Write_at(0, data)
    filetype.Free()
    sparse.Close()
fh.Close()
info.Free()
