"""PVFS2's mpi-io-test pattern: every rank writes, then reads back, interleaved blocks.

    callid run -n 4 examples/mpi_io_test.py -b 1MiB -i 8 [-f /pvfs2/mpi-io-test] [-c]

In iteration i rank r accesses the block at offset ``(i * nranks + r) * block``, with
MPI_File_write_at and read_at (``-c``: their collective forms, write_at_all and
read_at_all).  All ranks synchronise around each phase; the slowest rank's time gives
the aggregate bandwidth printed by rank 0, and the ranks' times their minimum, maximum,
mean and variance (as the original prints them).
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
    parser.add_argument("-c", "--collective", action="store_true",
                        help="collective I/O (write_at_all, read_at_all)")
    parser.add_argument("--no-read", action="store_true", help="skip the read-back phase")
    parser.add_argument("--no-check", action="store_true", help="do not verify the data read")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args()

    comm = MPI.COMM_WORLD
    rank, nranks = comm.Get_rank(), comm.Get_size()
    block = bytearray((rank * 7 + i) % 256 for i in range(args.block))
    offsets = [(i * nranks + rank) * args.block for i in range(args.iterations)]

    fh = MPI.File.Open(comm, args.file, MPI.MODE_RDWR | MPI.MODE_CREATE)
    write_at, read_at = (fh.Write_at_all, fh.Read_at_all) if args.collective else (fh.Write_at, fh.Read_at)
    comm.Barrier()
    t0 = MPI.Wtime()
    for off in offsets:
        write_at(off, block)
    fh.Sync()
    writes = spread(comm.allgather(MPI.Wtime() - t0))

    reads, ok = None, True
    if not args.no_read:
        buf = bytearray(args.block)
        comm.Barrier()
        t0 = MPI.Wtime()
        for off in offsets:
            read_at(off, buf)
            ok &= args.no_check or buf == block
        reads = spread(comm.allgather(MPI.Wtime() - t0))
    fh.Close()
    ok = comm.allreduce(ok, op=MPI.LAND)

    total = args.block * args.iterations * nranks
    if rank == 0:
        mib = total / (1 << 20)
        figures = {"ranks": nranks, "block": args.block, "iterations": args.iterations, "bytes": total,
                   "collective": args.collective, "write_s": writes["max"],
                   "write_MiBps": mib / writes["max"] if writes["max"] else None, "write_rank_s": writes,
                   "read_s": reads and reads["max"],
                   "read_MiBps": mib / reads["max"] if reads and reads["max"] else None, "read_rank_s": reads,
                   "check": ok}
        if args.json:
            import json

            print(json.dumps(figures))
        else:
            print(f"# mpi-io-test: {nranks} ranks, {args.iterations} x {args.block} bytes each"
                  + (", collective" if args.collective else ""))
            for name, times, rate in (("write:", writes, figures["write_MiBps"]),
                                      ("read: ", reads, figures["read_MiBps"])):
                if times:
                    print(f"# {name} {times['max']:.4f} s, {rate:.2f} MiB/s (per rank: min "
                          f"{times['min']:.4f} s, mean {times['mean']:.4f} s, variance "
                          f"{times['var'] * 1e6:.4f} ms^2)")
            print(f"# data check: {'passed' if ok else 'FAILED'}")
    return 0 if ok else 1


def spread(times: list[float]) -> dict[str, float]:
    """The ranks' times of a phase: minimum, maximum, mean and variance."""
    mean = sum(times) / len(times)
    return {"min": min(times), "max": max(times), "mean": mean,
            "var": sum((t - mean) ** 2 for t in times) / len(times)}


if __name__ == "__main__":
    sys.exit(main())
