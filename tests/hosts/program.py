"""A test program for file systems whose servers run elsewhere: ``write``/``read`` FILE (each rank its
256 KiB, striped over every I/O server; read checks the bytes, exit 1 if one is wrong); ``pause``
FILE READY GO: write, tell the test (READY), wait for it (GO), then write again."""

from __future__ import annotations

import os
import sys
import time

from mpi4py import MPI

SIZE = 256 * 1024


def pattern(rank: int) -> bytes:
    return bytes((rank * 7 + i) % 251 for i in range(SIZE))


def main() -> int:
    mode, name = sys.argv[1], sys.argv[2]
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    amode = MPI.MODE_RDONLY if mode == "read" else MPI.MODE_WRONLY | MPI.MODE_CREATE
    fh = MPI.File.Open(comm, name, amode)
    if mode == "read":
        buf = bytearray(SIZE)
        fh.Read_at(rank * SIZE, buf)
        ok = bytes(buf) == pattern(rank)
        print(f"rank {rank}: read back {'OK' if ok else 'WRONG'}", flush=True)
        fh.Close()
        return 0 if comm.allreduce(ok, op=MPI.LAND) else 1
    fh.Write_at(rank * SIZE, pattern(rank))
    if mode == "pause":
        comm.Barrier()
        ready, go = sys.argv[3], sys.argv[4]
        if rank == 0:
            open(ready, "w").close()
        while not os.path.exists(go):
            time.sleep(0.02)
        fh.Write_at(rank * SIZE, pattern(rank))
    fh.Close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
