"""S805: a collective write whose data sits mostly in the first half of its range, so that of two
aggregators (cb_nodes=2, romio_cb_write=enable) the first gets nearly all the bytes.

Ranks 0 and 1 write 1 MiB each at the file's start (rank x 1 MiB); ranks 2 and 3 write 64 KiB each at
its end, 8 MiB - 128 KiB and 8 MiB - 64 KiB.  The aggregators split the range [0, 8 MiB) evenly: rank 0
gets [0, 4 MiB) with 2 MiB of ranks 0 and 1, rank 1 gets [4 MiB, 8 MiB) with 128 KiB of ranks 2 and 3.
With ``--even`` ranks 2 and 3 write 1 MiB each too, ending the range at 8 MiB: 2 MiB per aggregator."""

import sys

from mpi4py import MPI

MIB = 1 << 20

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
small = MIB if "--even" in sys.argv[1:] else 64 * 1024
info = MPI.Info.Create()
info.Set("cb_nodes", "2")
info.Set("romio_cb_write", "enable")
fh = MPI.File.Open(comm, "/pvfs2/s805", MPI.MODE_CREATE | MPI.MODE_WRONLY, info)
info.Free()
if rank < 2:
    fh.Write_at_all(rank * MIB, bytes([rank + 1]) * MIB)
else:
    fh.Write_at_all(8 * MIB - (4 - rank) * small, bytes([rank + 1]) * small)
fh.Close()
