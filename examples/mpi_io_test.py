"""PVFS2's mpi-io-test pattern: every rank writes, then reads back, interleaved blocks.

    callid run -n 4 examples/mpi_io_test.py -b 1MiB -i 8 [-f /pvfs2/mpi-io-test]

In iteration i rank r accesses the block at offset ``(i * nranks + r) * block``.
All ranks synchronise around each phase; the slowest rank's time gives the
aggregate bandwidth printed by rank 0 (as the original prints it).
"""

from __future__ import annotations

import argparse
import sys

from mpi4py import MPI

from callid_core.units import parse_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-f", "--file", default="/pvfs2/mpi-io-test", help="file to use")
    parser.add_argument("-b", "--block", type=parse_size, default=1 << 20, help="block size (default 1MiB)")
    parser.add_argument("-i", "--iterations", type=int, default=4, help="blocks per rank (default 4)")
    parser.add_argument("--no-read", action="store_true", help="skip the read-back phase")
    parser.add_argument("--no-check", action="store_true", help="do not verify the data read")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args()

    comm = MPI.COMM_WORLD
    rank, nranks = comm.Get_rank(), comm.Get_size()
    block = bytearray((rank * 7 + i) % 256 for i in range(args.block))
    offsets = [(i * nranks + rank) * args.block for i in range(args.iterations)]

    fh = MPI.File.Open(comm, args.file, MPI.MODE_RDWR | MPI.MODE_CREATE)
    comm.Barrier()
    t0 = MPI.Wtime()
    for off in offsets:
        fh.Write_at(off, block)
    fh.Sync()
    write_time = comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX)

    read_time, ok = 0.0, True
    if not args.no_read:
        buf = bytearray(args.block)
        comm.Barrier()
        t0 = MPI.Wtime()
        for off in offsets:
            fh.Read_at(off, buf)
            ok &= args.no_check or buf == block
        read_time = comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX)
    fh.Close()
    ok = comm.allreduce(ok, op=MPI.LAND)

    total = args.block * args.iterations * nranks
    if rank == 0:
        mib = total / (1 << 20)
        figures = {"ranks": nranks, "block": args.block, "iterations": args.iterations, "bytes": total,
                   "write_s": write_time, "write_MiBps": mib / write_time if write_time else None,
                   "read_s": read_time or None, "read_MiBps": mib / read_time if read_time else None,
                   "check": ok}
        if args.json:
            import json

            print(json.dumps(figures))
        else:
            print(f"# mpi-io-test: {nranks} ranks, {args.iterations} x {args.block} bytes each")
            print(f"# write: {write_time:.4f} s, {figures['write_MiBps']:.2f} MiB/s")
            if read_time:
                print(f"# read:  {read_time:.4f} s, {figures['read_MiBps']:.2f} MiB/s")
            print(f"# data check: {'passed' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
