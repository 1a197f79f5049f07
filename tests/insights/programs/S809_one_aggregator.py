"""S809: four ranks write ``CALLS`` times collectively with one aggregator (cb_nodes=1, collective
buffering forced), ``SIZE`` contiguous bytes each per call: rank 0 does all the I/O while the others
only send it their data and wait for it."""

from mpi4py import MPI

SIZE, CALLS = 2 << 20, 2

comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()
info = MPI.Info.Create()
info.Set("cb_nodes", "1")
info.Set("romio_cb_write", "enable")
fh = MPI.File.Open(comm, "/pvfs2/one_aggregator", MPI.MODE_CREATE | MPI.MODE_WRONLY, info)
data = bytes([rank + 1]) * SIZE
for i in range(CALLS):
    comm.Barrier()
    fh.Write_at_all((i * nranks + rank) * SIZE, data)
fh.Close()
info.Free()
