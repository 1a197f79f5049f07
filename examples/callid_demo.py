"""The thesis demo: each rank writes its segment, all synchronise, each reads the next rank's.

    callid run -n 2 examples/callid_demo.py [--file /pvfs2/demo] [--size 1MiB]

Every rank writes ``size`` bytes (a pattern derived from its rank) to its own
segment of one file, then reads the segment of rank+1 (rotating) and checks it.
Short pauses between the phases spread the events on a timeline, as in the
original C program.  Exits non-zero if the read-back check fails.
"""

from __future__ import annotations

import argparse
import sys
import time

from mpi4py import MPI


def pattern(rank: int, size: int) -> bytes:
    """Bytes that differ between ranks and along the segment."""
    unit = bytes((rank * 31 + i) % 251 for i in range(251))
    return (unit * (size // len(unit) + 1))[:size]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", default="/pvfs2/demo", help="file to use (default /pvfs2/demo)")
    parser.add_argument("--size", type=int, default=1 << 20, help="bytes per rank (default 1 MiB)")
    args = parser.parse_args()

    comm = MPI.COMM_WORLD
    rank, nranks = comm.Get_rank(), comm.Get_size()
    print(f"Process {rank} of {nranks} is on {MPI.Get_processor_name()}", flush=True)
    pause = 0.010 * rank

    fh = MPI.File.Open(comm, args.file, MPI.MODE_WRONLY | MPI.MODE_CREATE)
    fh.Seek(rank * args.size, MPI.SEEK_SET)
    comm.Barrier()
    time.sleep(pause)  # keep the ranks' server events apart, as the thesis did
    fh.Write([pattern(rank, args.size), MPI.CHAR])
    fh.Close()
    comm.Barrier()
    time.sleep(0.002)

    fh = MPI.File.Open(comm, args.file, MPI.MODE_RDONLY)
    nxt = (rank + 1) % nranks
    fh.Seek(nxt * args.size, MPI.SEEK_SET)
    comm.Barrier()
    time.sleep(pause)
    buf = bytearray(args.size)
    status = MPI.Status()
    fh.Read([buf, MPI.CHAR], status)
    fh.Close()
    comm.Barrier()

    ok = bytes(buf) == pattern(nxt, args.size) and status.Get_count(MPI.CHAR) == args.size
    print(f"rank {rank}: read-back of rank {nxt}'s segment {'OK' if ok else 'FAILED'}", flush=True)
    return 0 if comm.allreduce(ok, op=MPI.LAND) else 1


if __name__ == "__main__":
    sys.exit(main())
