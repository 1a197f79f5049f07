"""MACSio-like I/O proxy: dumps of mesh parts to N files with baton passing (MIF) or one shared file (SIF).

    callid run -n 4 examples/macsio.py --parallel-file-mode MIF 2 [--num-dumps 2 --part-size 40000]

The ranks hold ``--avg-num-parts`` mesh parts each on average (a fractional value gives some
ranks one part more, deterministically: part ids are dealt out evenly in rank order).  Each part
has ``--vars-per-part`` variables of ``--part-size`` bytes, and each variable is one write
request, as MACSio's nominal request size.  Every dump writes new files named
``FILEBASE_mpiio_FILE_DUMP.dat`` in ``--directory``:

- ``MIF N``: the ranks form N groups of consecutive ranks (the first groups one rank larger when
  N does not divide the rank count), one file per group.  The first rank of a group creates the
  file (truncating an old one) and writes the dump's header (``--meta-size`` bytes).  Each rank
  opens the file alone (``MPI_COMM_SELF``), appends its parts with independent writes, closes it
  and hands the baton (the offset where the next rank goes on) to the next rank of its group.
  ``MIFFPP``: one file per rank.
- ``SIF``: all ranks open (and truncate) one file together; rank 0 writes the header, then each
  variable is one collective write in which every rank writes its parts' slab at its own offsets
  (variable-major, as a dataset per variable).

Between dumps the ranks sleep ``--compute-time`` seconds and the part size grows by
``--dataset-growth``.  Afterwards every file is read back through MPI-IO and every byte checked
against the pattern of (dump, rank, part, variable).  Rank 0 prints MACSio's totals (bytes, files,
last finisher - first starter, bandwidth) and the verdict; the exit status is 1 when the read-back
fails, 2 for bad options.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI
from mpi_options import Parser, size_arg

COMM = MPI.COMM_WORLD
BATON_TAG = 3
_MIX1 = np.uint64(0x9E3779B97F4A7C15)
_MIX2 = np.uint64(0xBF58476D1CE4E5B9)


def pattern(n: int, *key: int) -> np.ndarray:
    """``n`` deterministic bytes, a different stream for every ``key`` (dump, rank, part, var)."""
    seed = 0
    for k in key:
        seed = (seed * 1_000_003 + k + 1) % (1 << 64)
    x = (np.arange(n, dtype=np.uint64) + np.uint64(seed)) * _MIX1
    x ^= x >> np.uint64(31)
    x *= _MIX2
    return (x >> np.uint64(56)).astype(np.uint8)


def header(n: int, dump: int, index: int, nfiles: int) -> np.ndarray:
    """The ``n``-byte header (metadata) of file ``index`` of a dump: a text line, then pattern bytes."""
    text = np.frombuffer(f"macsio.py dump {dump} file {index} of {nfiles}\n".encode(), dtype=np.uint8)
    return np.concatenate([text, pattern(n, dump, -1 - index)])[:n]


@dataclass(frozen=True)
class Layout:
    """Who holds which parts and where every byte of a dump goes (the same on every rank)."""

    nranks: int
    total_parts: int
    nfiles: int
    sif: bool
    vars_per_part: int
    meta_size: int

    def first_part(self, rank: int) -> int:
        return rank * self.total_parts // self.nranks

    def num_parts(self, rank: int) -> int:
        return self.first_part(rank + 1) - self.first_part(rank)

    def group_first_rank(self, index: int) -> int:
        size, extra = divmod(self.nranks, self.nfiles)
        return index * (size + 1) if index < extra else extra * (size + 1) + (index - extra) * size

    def group(self, rank: int) -> tuple[int, int, int]:
        """(file index, first rank, number of ranks) of ``rank``'s group: MACSio's grouping, the first
        ``nranks % nfiles`` groups one rank larger (SIF: everyone, file 0)."""
        if self.sif:
            return 0, 0, self.nranks
        size, extra = divmod(self.nranks, self.nfiles)
        big = (size + 1) * extra
        index = rank // (size + 1) if rank < big else extra + (rank - big) // size
        return index, self.group_first_rank(index), size + (index < extra)

    def file_size(self, index: int, var_size: int) -> int:
        """Bytes of file ``index`` of a dump whose variables are ``var_size`` bytes."""
        _, first, n = self.group(self.group_first_rank(index))
        parts = self.first_part(first + n) - self.first_part(first)
        return self.meta_size + parts * self.vars_per_part * var_size

    def requests(self, rank: int, var_size: int) -> list[tuple[int, int, list[int]]]:
        """``rank``'s write requests of a dump as (offset, var, [part ids]), in the order written."""
        first, n, vpp = self.first_part(rank), self.num_parts(rank), self.vars_per_part
        if self.sif:  # one slab per variable: the rank's parts of it, contiguous
            mine = list(range(first, first + n))
            return [(self.meta_size + (v * self.total_parts + first) * var_size, v, mine) for v in range(vpp)]
        base = self.meta_size + (first - self.first_part(self.group(rank)[1])) * vpp * var_size
        return [(base + (i * vpp + v) * var_size, v, [first + i]) for i in range(n) for v in range(vpp)]


def request_data(dump: int, rank: int, var: int, parts: list[int], var_size: int) -> np.ndarray:
    if not parts:
        return np.empty(0, dtype=np.uint8)
    return np.concatenate([pattern(var_size, dump, rank, p, var) for p in parts])


def file_name(args: argparse.Namespace, index: int, dump: int) -> str:
    return os.path.join(args.directory, f"{args.filebase}_mpiio_{index:05d}_{dump:03d}.dat")


def var_size(args: argparse.Namespace, dump: int) -> int:
    return max(1, round(args.part_size * args.dataset_growth ** dump))


def dump_mif(args: argparse.Namespace, layout: Layout, dump: int) -> int:
    """One MIF dump: wait for the baton, append this rank's parts to the group file, pass the baton."""
    rank = COMM.Get_rank()
    index, first, n = layout.group(rank)
    name, size = file_name(args, index, dump), var_size(args, dump)
    written = 0
    if rank == first:
        fh = MPI.File.Open(MPI.COMM_SELF, name, MPI.MODE_WRONLY | MPI.MODE_CREATE)
        fh.Set_size(0)  # a new file, as MACSio's create (fopen "w") makes it
        offset = 0
        if layout.meta_size:
            fh.Write_at(0, header(layout.meta_size, dump, index, layout.nfiles))
            offset = written = layout.meta_size
    else:
        offset = COMM.recv(source=rank - 1, tag=BATON_TAG)
        fh = MPI.File.Open(MPI.COMM_SELF, name, MPI.MODE_WRONLY)
    for off, var, parts in layout.requests(rank, size):
        if off != offset:
            raise RuntimeError(f"baton says offset {offset}, layout says {off}")
        data = request_data(dump, rank, var, parts, size)
        fh.Write_at(off, data)
        offset += len(data)
        written += len(data)
    fh.Close()
    if rank + 1 < first + n:
        COMM.send(offset, dest=rank + 1, tag=BATON_TAG)
    return written


def dump_sif(args: argparse.Namespace, layout: Layout, dump: int) -> int:
    """One SIF dump: rank 0 writes the header, then one collective write per variable."""
    rank = COMM.Get_rank()
    size = var_size(args, dump)
    fh = MPI.File.Open(COMM, file_name(args, 0, dump), MPI.MODE_WRONLY | MPI.MODE_CREATE)
    fh.Set_size(0)  # a new file, as MACSio's create makes it
    written = 0
    if rank == 0 and layout.meta_size:
        fh.Write_at(0, header(layout.meta_size, dump, 0, 1))
        written = layout.meta_size
    for off, var, parts in layout.requests(rank, size):
        data = request_data(dump, rank, var, parts, size)
        fh.Write_at_all(off, data)
        written += len(data)
    fh.Close()
    return written


def read_back(args: argparse.Namespace, layout: Layout) -> tuple[int, int, int]:
    """Read every file of every dump and compare: (bytes read, bytes wrong, files of the wrong size)."""
    rank = COMM.Get_rank()
    index, first, _ = layout.group(rank)
    comm = COMM if layout.sif else COMM.Split(index, rank)
    nread = bad = bad_files = 0
    for dump in range(args.num_dumps):
        size = var_size(args, dump)
        fh = MPI.File.Open(comm, file_name(args, index, dump), MPI.MODE_RDONLY)
        if rank == first:
            if fh.Get_size() != layout.file_size(index, size):
                bad_files += 1
            if layout.meta_size:
                expect = header(layout.meta_size, dump, index, layout.nfiles)
                buf = np.empty(layout.meta_size, dtype=np.uint8)
                fh.Read_at(0, buf)
                nread += len(buf)
                bad += int(np.count_nonzero(buf != expect))
        for off, var, parts in layout.requests(rank, size):
            expect = request_data(dump, rank, var, parts, size)
            buf = np.empty_like(expect)
            (fh.Read_at_all if layout.sif else fh.Read_at)(off, buf)
            nread += len(buf)
            bad += int(np.count_nonzero(buf != expect))
        fh.Close()
    if comm is not COMM:
        comm.Free()
    return nread, bad, bad_files


def parse_args(parser: Parser) -> tuple[argparse.Namespace, Layout]:
    """Parse and check the options; the layout they give on this many ranks."""
    args = parser.parse_args()
    nranks = COMM.Get_size()
    mode = [m.upper() for m in args.parallel_file_mode]
    if mode[0] == "MIF" and len(mode) == 2 and mode[1].isdigit() and int(mode[1]) >= 1:
        nfiles = int(mode[1])
    elif mode in (["SIF"], ["MIFFPP"]):
        nfiles = 1 if mode[0] == "SIF" else nranks
    else:
        parser.error(f"--parallel-file-mode: expected 'MIF N' (N >= 1), 'MIFFPP' or 'SIF', "
                     f"got {' '.join(args.parallel_file_mode)!r}")
    for name, low in (("avg_num_parts", 0), ("part_size", 1), ("vars_per_part", 1), ("num_dumps", 1),
                      ("dataset_growth", 1), ("compute_time", 0), ("meta_size", 0)):
        value = getattr(args, name)
        if value < low or (name == "avg_num_parts" and value == 0):
            rel = "> 0" if name == "avg_num_parts" else f">= {low}"
            parser.error(f"--{name.replace('_', '-')} must be {rel}, got {value}")
    total = round(args.avg_num_parts * nranks)
    if total < 1:
        parser.error(f"--avg-num-parts {args.avg_num_parts} on {nranks} ranks gives no part")
    if COMM.Get_rank() == 0 and abs(total - args.avg_num_parts * nranks) > 1e-9:
        print(f"{parser.prog}: note: {args.avg_num_parts} parts x {nranks} ranks rounded to {total} parts",
              file=sys.stderr)
    if nfiles > nranks:
        if COMM.Get_rank() == 0:
            print(f"{parser.prog}: note: MIF {nfiles} on {nranks} ranks: writing {nranks} files",
                  file=sys.stderr)
        nfiles = nranks
    layout = Layout(nranks, total, nfiles, mode[0] == "SIF", args.vars_per_part, args.meta_size)
    args.mode = {"SIF": "SIF", "MIF": f"MIF {nfiles}", "MIFFPP": f"MIFFPP ({nfiles} files)"}[mode[0]]
    return args, layout


def make_parser() -> Parser:
    parser = Parser(prog="macsio.py", description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--parallel-file-mode", "--parallel_file_mode", nargs="+", default=["MIF", "4"], metavar="MODE",
        help="'MIF N': N files, one per group of ranks, written in turn (baton passing); 'MIFFPP': one "
             "file per rank; 'SIF': one shared file, collective writes (default MIF 4)")
    add("--part-size", "--part_size", type=size_arg, default=80000, metavar="SIZE",
        help="bytes of each variable of a part, the nominal request size (default 80000)")
    add("--avg-num-parts", "--avg_num_parts", type=float, default=1.0, metavar="F",
        help="average parts per rank; fractional: some ranks get one more (default 1)")
    add("--vars-per-part", "--vars_per_part", type=int, default=20, metavar="N",
        help="variables per part, one write request each (default 20)")
    add("--num-dumps", "--num_dumps", type=int, default=10, metavar="N", help="dumps to write (default 10)")
    add("--dataset-growth", "--dataset_growth", type=float, default=1.0, metavar="F",
        help="factor by which the part size grows from one dump to the next (default 1: no growth)")
    add("--compute-time", "--compute_time", type=float, default=0.0, metavar="SECONDS",
        help="seconds of simulated compute (a sleep) between dumps (default 0)")
    add("--meta-size", "--meta_size", type=size_arg, default=10000, metavar="SIZE",
        help="bytes of the header (metadata) the first rank of each file writes per dump; 0: none "
             "(default 10000)")
    add("--filebase", default="macsio", help="first part of the file names (default macsio)")
    add("--directory", default="/pvfs2", help="directory of the files (default /pvfs2, the simulated file "
        "system under callid run)")
    add("--read-back", action=argparse.BooleanOptionalAction, default=True,
        help="after the dumps, read every file back and check every byte (default on)")
    return parser


def main() -> int:
    parser = make_parser()
    args, layout = parse_args(parser)
    rank, nranks = COMM.Get_rank(), COMM.Get_size()
    dump = dump_sif if layout.sif else dump_mif
    written = 0
    COMM.Barrier()
    start = MPI.Wtime()
    for d in range(args.num_dumps):
        if d and args.compute_time:
            time.sleep(args.compute_time)
        written += dump(args, layout, d)
    end = MPI.Wtime()
    first_start = COMM.allreduce(start, op=MPI.MIN)
    last_finish = COMM.allreduce(end, op=MPI.MAX)
    total = COMM.allreduce(written, op=MPI.SUM)
    checked = None
    if args.read_back:
        COMM.Barrier()
        nread, bad, bad_files = (COMM.allreduce(x, op=MPI.SUM) for x in read_back(args, layout))
        checked = (nread, bad, bad_files)
    if rank == 0:
        elapsed = last_finish - first_start
        nfiles = layout.nfiles * args.num_dumps
        print(f"macsio: {args.mode}, {nranks} ranks, {args.num_dumps} dumps, {layout.total_parts} parts x "
              f"{args.vars_per_part} vars x {args.part_size} bytes (growth {args.dataset_growth:g})")
        print(f"macsio: total bytes {total} ({total / 2**20:.4f} MiB) in {nfiles} files; last finisher - "
              f"first starter = {elapsed:.4f} s; BW = {total / 2**20 / elapsed:.4f} MiB/s")
        if checked is None:
            print("macsio: read-back skipped")
        elif checked[1] == 0 and checked[2] == 0 and checked[0] == total:
            print(f"macsio: read-back OK ({checked[0]} bytes in {nfiles} files)")
        else:
            print(f"macsio: read-back FAILED ({checked[1]} of {checked[0]} bytes wrong, {checked[2]} files "
                  f"of the wrong size, {total} bytes written)")
    ok = checked is None or (checked[1] == 0 and checked[2] == 0 and checked[0] == total)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
