"""IOR-like MPI-IO benchmark: segments of blocks per task, written and read in transfers, with IOR's options.

    callid run -n 4 examples/ior.py -a MPIIO -b 1m -t 256k -s 2 [-F] [-c] [-C] [-e] [-k] [-o /pvfs2/testFile]

As IOR lays out a shared file, segment s of task r is the block at offset ``(s * ntasks + r) * block``
(with ``-F`` each task has its own file ``TESTFILE.%08d`` and segment s is at ``s * block``); each
block is written and read in transfers of ``-t`` bytes, one ``MPI_File_write_at`` (``-c``:
``MPI_File_write_at_all``) each.  Every iteration writes, reads (checking every byte against the
pattern the writing task put there) and removes the file(s) unless ``-k``.  ``-C`` makes task r
read what task ``r + Q`` wrote (``-Q``, default 1), as IOR does to defeat client caches.  Timing
as IOR: from the first open to the last close, all tasks.  Rank 0 prints IOR's results table and
summary and the read-back verdict; the exit status is 1 when data is wrong or a file cannot be
opened, 2 for bad options (only ``-a MPIIO`` is supported).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI
from mpi_options import Parser, size_arg

COMM = MPI.COMM_WORLD
MIB = 1 << 20


def pattern(task: int, offset: int, n: int) -> np.ndarray:
    """The ``n`` bytes ``task`` writes at ``offset``: 8-byte words holding the task and the word's place."""
    first = offset // 8
    words = np.arange(first, first + (n + 7) // 8, dtype=np.uint64) | np.uint64((task + 1) << 48)
    return words.view(np.uint8)[:n]


@dataclass
class Phase:
    """One write or read phase of one iteration, reduced over the tasks (seconds)."""

    op: str
    iteration: int
    nbytes: int
    transfers: int
    open: float
    rw: float
    close: float
    total: float

    @property
    def bw(self) -> float:
        return self.nbytes / MIB / self.total if self.total else 0.0


class OpenFailed(Exception):
    """A test file could not be opened (the message says which and why)."""


def file_name(args: argparse.Namespace, task: int) -> str:
    return f"{args.o}.{task:08d}" if args.F else args.o


def offsets(args: argparse.Namespace, task: int, ntasks: int) -> list[int]:
    """The file offset of every transfer of ``task``, in the order of access."""
    per_block = args.b // args.t
    return [(s * (1 if args.F else ntasks) + (0 if args.F else task)) * args.b + k * args.t
            for s in range(args.s) for k in range(per_block)]


def open_file(args: argparse.Namespace, task: int, amode: int) -> MPI.File:
    """Open the file task ``task`` wrote; if any task cannot, all raise :class:`OpenFailed` together."""
    comm = MPI.COMM_SELF if args.F else COMM
    fh, why = None, None
    try:
        fh = MPI.File.Open(comm, file_name(args, task), amode)
    except MPI.Exception as exc:
        why = f"cannot open {file_name(args, task)}: {exc.Get_error_string()}"
    failed = list(dict.fromkeys(w for w in COMM.allgather(why) if w))  # a shared file fails once
    if failed:
        if fh is not None:
            fh.Close()
        more = f" (and {len(failed) - 1} more tasks)" if len(failed) > 1 else ""
        raise OpenFailed(failed[0] + more)
    return fh


def phase(args: argparse.Namespace, op: str, iteration: int) -> tuple[Phase, int]:
    """Run one phase on every task: its figures and the number of wrong bytes read."""
    rank, ntasks = COMM.Get_rank(), COMM.Get_size()
    write = op == "write"
    task = rank if write or not args.C else (rank + args.Q) % ntasks
    amode = MPI.MODE_CREATE | MPI.MODE_WRONLY if write else MPI.MODE_RDONLY
    where = offsets(args, task, ntasks)
    wrong = 0
    COMM.Barrier()
    t0 = MPI.Wtime()
    fh = open_file(args, task, amode)
    t1 = t2 = MPI.Wtime()
    if write:
        access = fh.Write_at_all if args.c else fh.Write_at
        for off in where:
            access(off, pattern(task, off, args.t))
        if args.e:
            fh.Sync()
    else:
        access = fh.Read_at_all if args.c else fh.Read_at
        buf = np.empty(args.t, dtype=np.uint8)
        for off in where:
            access(off, buf)
            wrong += int(np.count_nonzero(buf != pattern(task, off, args.t)))
    t3 = t4 = MPI.Wtime()
    fh.Close()
    t5 = MPI.Wtime()
    lo, hi = np.empty(3), np.empty(3)
    COMM.Allreduce(np.array([t0, t2, t4]), lo, op=MPI.MIN)  # first start of each timer
    COMM.Allreduce(np.array([t1, t3, t5]), hi, op=MPI.MAX)  # last end
    nbytes = args.b * args.s * ntasks
    result = Phase(op, iteration, nbytes, len(where), open=hi[0] - lo[0], rw=hi[1] - lo[1],
                   close=hi[2] - lo[2], total=hi[2] - lo[0])
    return result, COMM.allreduce(wrong, op=MPI.SUM)


def remove(args: argparse.Namespace) -> float:
    """Delete the test file(s) as IOR does after an iteration; the seconds it took."""
    COMM.Barrier()
    t0 = MPI.Wtime()
    if args.F:
        MPI.File.Delete(file_name(args, COMM.Get_rank()))
    elif COMM.Get_rank() == 0:
        MPI.File.Delete(args.o)
    COMM.Barrier()
    return MPI.Wtime() - t0


def kib(n: int) -> str:
    return f"{n / 1024:.2f}"


def print_header(args: argparse.Namespace, ntasks: int) -> None:
    agg = args.b * args.s * ntasks
    rows = [("api", "MPIIO"), ("test filename", args.o + (".%08d" if args.F else "")),
            ("access", "file-per-process" if args.F else "single-shared-file"),
            ("type", "collective" if args.c else "independent"), ("segments", args.s),
            ("ordering inter file", f"constant task offset (-Q {args.Q})" if args.C else "no tasks offsets"),
            ("tasks", ntasks), ("repetitions", args.i), ("xfersize", f"{args.t} bytes"),
            ("blocksize", f"{args.b} bytes"), ("aggregate filesize", f"{agg} bytes ({agg / MIB:.2f} MiB)")]
    print("IOR-like MPI-IO test (examples/ior.py)")
    print("Options:")
    for key, value in rows:
        print(f"{key:<20}: {value}")
    print()
    print(f"{'access':<10}{'bw(MiB/s)':<11}{'IOPS':<11}{'Latency(s)':<12}{'block(KiB)':<11}{'xfer(KiB)':<11}"
          f"{'open(s)':<11}{'wr/rd(s)':<11}{'close(s)':<11}{'total(s)':<11}iter")
    print(f"{'------':<10}{'---------':<11}{'----':<11}{'----------':<12}{'----------':<11}{'---------':<11}"
          f"{'-------':<11}{'--------':<11}{'--------':<11}{'--------':<11}----")


def print_phase(args: argparse.Namespace, p: Phase) -> None:
    ops = p.transfers * COMM.Get_size()
    iops = ops / p.rw if p.rw else 0.0
    latency = p.rw / p.transfers if p.transfers else 0.0
    print(f"{p.op:<10}{p.bw:<11.2f}{iops:<11.2f}{latency:<12.6f}{kib(args.b):<11}{kib(args.t):<11}"
          f"{p.open:<11.6f}{p.rw:<11.6f}{p.close:<11.6f}{p.total:<11.6f}{p.iteration}", flush=True)


def print_summary(args: argparse.Namespace, results: list[Phase]) -> None:
    ntasks = COMM.Get_size()
    print()
    for op in ("write", "read"):
        bws = [p.bw for p in results if p.op == op]
        if bws:
            best = max(bws)
            print(f"Max {op.capitalize() + ':':<6} {best:.2f} MiB/sec ({best * MIB / 1e6:.2f} MB/sec)")
    print()
    print("Summary of all tests:")
    print(f"{'Operation':<10}{'Max(MiB)':>11}{'Min(MiB)':>11}{'Mean(MiB)':>11}{'StdDev':>11}{'Mean(s)':>11}"
          f"{'#Tasks':>7}{'reps':>5}{'fPP':>4}{'reord':>6}{'segcnt':>7}{'blksiz':>11}{'xsize':>10}"
          f"{'aggs(MiB)':>10}{'API':>6}")
    for op in ("write", "read"):
        mine = [p for p in results if p.op == op]
        if not mine:
            continue
        bws = [p.bw for p in mine]
        dev = statistics.pstdev(bws)
        mean_s = statistics.fmean(p.total for p in mine)
        print(f"{op:<10}{max(bws):>11.2f}{min(bws):>11.2f}{statistics.fmean(bws):>11.2f}{dev:>11.2f}"
              f"{mean_s:>11.5f}{ntasks:>7}{args.i:>5}{int(args.F):>4}{int(args.C):>6}{args.s:>7}{args.b:>11}"
              f"{args.t:>10}{mine[0].nbytes / MIB:>10.2f}{'MPIIO':>6}")


def make_parser() -> Parser:
    parser = Parser(prog="ior.py", description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("-a", metavar="API", default="MPIIO", help="I/O API; only MPIIO is supported (default MPIIO)")
    add("-b", metavar="SIZE", type=size_arg, default=1 << 20,
        help="blockSize: contiguous bytes a task writes per segment, e.g. 1m, 64k, 1MiB (default 1m)")
    add("-t", metavar="SIZE", type=size_arg, default=256 << 10,
        help="transferSize: bytes per I/O call; must divide -b (default 256k)")
    add("-s", metavar="N", type=int, default=1, help="segmentCount: blocks per task (default 1)")
    add("-F", action="store_true", help="filePerProc: one file per task (TESTFILE.%%08d)")
    add("-c", action="store_true",
        help="collective: MPI_File_write_at_all/read_at_all instead of write_at/read_at")
    add("-w", action="store_true", help="writeFile: write the file (without -w and -r: both)")
    add("-r", action="store_true", help="readFile: read the file and check it (without -w and -r: both)")
    add("-o", metavar="TESTFILE", default="/pvfs2/testFile", help="test file name (default /pvfs2/testFile)")
    add("-i", metavar="N", type=int, default=1, help="repetitions: iterations of the test (default 1)")
    add("-C", action="store_true", help="reorderTasks: task r reads the data of task r + Q (see -Q)")
    add("-Q", metavar="N", type=int, default=1, help="taskPerNodeOffset: the task shift of -C (default 1)")
    add("-e", action="store_true", help="fsync: MPI_File_sync at the end of each write phase")
    add("-k", action="store_true", help="keepFile: do not remove the test file(s) after each iteration")
    return parser


def parse_args(parser: Parser) -> argparse.Namespace:
    args = parser.parse_args()
    if args.a.upper() != "MPIIO":
        parser.error(f"-a {args.a}: only the MPIIO API is supported")
    for name, low in (("b", 1), ("t", 1), ("s", 1), ("i", 1), ("Q", 0)):
        if getattr(args, name) < low:
            parser.error(f"-{name} must be at least {low}, got {getattr(args, name)}")
    if args.b % args.t:
        parser.error(f"block size must be a multiple of transfer size (-b {args.b}, -t {args.t})")
    if not args.w and not args.r:
        args.w = args.r = True
    return args


def main() -> int:
    args = parse_args(make_parser())
    rank = COMM.Get_rank()
    if rank == 0:
        print_header(args, COMM.Get_size())
    results: list[Phase] = []
    wrong = checked = 0
    try:
        for it in range(args.i):
            for op in ("write", "read"):
                if (op == "write" and args.w) or (op == "read" and args.r):
                    result, bad = phase(args, op, it)
                    results.append(result)
                    wrong += bad
                    checked += result.nbytes if op == "read" else 0
                    if rank == 0:
                        print_phase(args, result)
            if not args.k:
                took = remove(args)
                if rank == 0:
                    print(f"{'remove':<10}{'-':<11}{'-':<11}{'-':<12}{'-':<11}{'-':<11}{'-':<11}{'-':<11}"
                          f"{'-':<11}{took:<11.6f}{it}")
    except OpenFailed as exc:
        if rank == 0:
            print(f"ior.py: error: {exc}", file=sys.stderr)
        return 1
    if rank == 0:
        print_summary(args, results)
        if not args.r:
            print("ior: read-back skipped (no -r)")
        elif wrong:
            print(f"ior: read-back FAILED ({wrong} of {checked} bytes wrong)")
        else:
            print(f"ior: read-back OK ({checked} bytes checked)")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
