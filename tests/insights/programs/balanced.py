"""A balanced workload: no server-side insight grades it high or warning.

Every rank writes ``--blocks`` blocks of one strip (64 KiB: the default strip size and flow buffer) at
strip-aligned offsets, the ranks' blocks interleaved, so every I/O server gets the same bytes in as many
disk operations of the requested size; then each rank reads its blocks back once."""

from __future__ import annotations

import argparse

from mpi4py import MPI

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--blocks", type=int, default=16, help="blocks per rank (default 16)")
args = parser.parse_args()

STRIP = 64 * 1024
comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()
fh = MPI.File.Open(comm, "/pvfs2/balanced", MPI.MODE_CREATE | MPI.MODE_RDWR)
data = bytes([rank + 1]) * STRIP
for i in range(args.blocks):
    fh.Write_at((i * nranks + rank) * STRIP, data)
back = bytearray(STRIP)
for i in range(args.blocks):
    fh.Read_at((i * nranks + rank) * STRIP, back)
    assert back == data
fh.Close()
