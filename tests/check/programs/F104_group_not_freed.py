"""F104: each rank asks the file's group twice and frees one of the two (MARMOT: a warning); with
``--free-all``, both (no finding)."""

import sys

from mpi4py import MPI

NP = 2

comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, "/pvfs2/f104", MPI.MODE_CREATE | MPI.MODE_RDWR)
kept = fh.Get_group()
freed = fh.Get_group()
assert freed.Get_size() == 2
freed.Free()
if "--free-all" in sys.argv:
    kept.Free()
comm.Get_group().Free()  # (a communicator's group: not the file's, not logged)
fh.Close()
