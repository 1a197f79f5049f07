"""MACSio-like I/O proxy: dumps of mesh parts to N files with baton passing (MIF) or shared files (SIF).

    callid run -n 4 examples/macsio.py --parallel-file-mode MIF 2 [--num-dumps 2 --part-size 40000]

Options take MACSio's spellings (``--part_size``) and dashed ones (``--part-size``).  The ranks (tasks)
hold ``--avg-num-parts`` mesh parts each on average: a fractional value gives some ranks K parts and
the others K+1.  By default the part ids are dealt out evenly in rank order; ``--part_seed S`` (or
``--time_randomize``) deals K or K+1 at random as MACSio does, weighted so that the total comes out.
A part is ``--vars-per-part`` variables of ``--part-size`` bytes, one write request each, as
MACSio's nominal request size; with ``--part_type`` (and ``--part_dim``) it is a real mesh part
instead, whose arrays follow its node and zone counts (see :func:`mesh_arrays`).  Every dump writes
new files named ``FILEBASE_mpiio_FILE_DUMP.dat`` in ``--directory``:

- ``MIF N``: the ranks form N groups of consecutive ranks (the first groups one rank larger when
  N does not divide the rank count), one file per group.  The first rank of a group creates the
  file (truncating an old one) and writes the dump's header (``--meta-size`` bytes).  Each rank
  opens the file alone (``MPI_COMM_SELF``), appends its parts with independent writes, closes it
  and hands the baton (the offset where the next rank goes on) to the next rank of its group.
  ``MIFFPP``: one file per rank.  ``MIFOPT``: MIF with the file count MACSio's docs advise, the
  number of independent I/O pathways: the I/O servers a file is striped over (see
  :func:`optimum_files`).
- ``SIF`` (``SIF N``: N files, ranks grouped as for MIF): the ranks of a group open (and truncate)
  their file together; its first rank writes the header, then each variable is one collective write
  (``--sif-independent`` / ``--no_collective``: independent) in which every rank writes its parts'
  slab at its own offsets (variable-major, as a dataset per variable).

``--meta_size A B`` (two sizes, MACSio's) replaces the header: each task writes A bytes of
``--meta_type`` metadata (task 0 A + B) after its parts, one request per table (tabular) or per
object (amorphous).  ``--root-file`` writes, each dump, a JSON root file saying where every array of
every part is, with one collective write.  Between dumps the ranks compute ``--compute-time`` seconds
(``--compute_work_intensity`` 1: sleep, 2: flops on randomly accessed data, 3: Jacobi sweeps) and the
part size grows by ``--dataset-growth``.  Afterwards every file is read back through MPI-IO and
every byte checked (the root files against the layout).  Rank 0 prints MACSio's totals (bytes,
files, last finisher - first starter, bandwidth) and the verdict; every task logs to
``macsio-log.log`` and its timers to ``macsio-timings.log`` (in ``--log-dir``, with the timers reduced
over the tasks).  The exit status is 1 when the read-back fails, 2 for bad options.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import json
import math
import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from mpi4py import MPI
from mpi_options import Parser, size_arg

COMM = MPI.COMM_WORLD
BATON_TAG = 3
_MIX1 = np.uint64(0x9E3779B97F4A7C15)
_MIX2 = np.uint64(0xBF58476D1CE4E5B9)
M64 = (1 << 64) - 1
META_SEED = 0xDEADBEEF  # the randomness of a run without --time_randomize (the same every dump)
PART_TYPES = ("uniform", "rectilinear", "curvilinear", "unstructured", "arbitrary")
ZONE_VARS = (0, 1, 2, 7)  # MACSio's variables cycle: i % 8 in these is zone-centered, else node-centered
VAR_NAMES = ("constant", "random", "spherical", "xramp", "ysin", "noise", "noise_sum", "xlayers")


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


class Rng:
    """A small PRNG (splitmix64) keyed by integers: the same stream on every rank and platform."""

    def __init__(self, *key: int) -> None:
        self.state = 0
        for k in key:
            self.state = self._mix((self.state ^ k) & M64)

    @staticmethod
    def _mix(x: int) -> int:
        x = (x + 0x9E3779B97F4A7C15) & M64
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
        return x ^ (x >> 31)

    def next(self) -> int:
        self.state = self._mix(self.state)
        return self.state

    def uniform(self) -> float:
        """A float in [0, 1)."""
        return (self.next() >> 11) / float(1 << 53)

    def below(self, n: int) -> int:
        return self.next() % n


# --- sizes and units (--units_prefix_system) ---

_SIZE_TEXT = re.compile(r"^\s*(\d+)\s*(b|k|m|g|t|kb|mb|gb|tb|kib|mib|gib|tib)?\s*$", re.IGNORECASE)
_POWERS = "bkmgt"


def size_text(text: str) -> str:
    """An argparse type: a size as given (read by :func:`parse_macsio_size` once the units are known)."""
    if not _SIZE_TEXT.match(text):
        size_arg(text)  # refuses it with the usual message
    return text


def parse_macsio_size(text: str | int, system: str) -> int:
    """MACSio's sizes: B, K, M, G, T (or KB, MB, ...) are powers of 1000 with the ``decimal`` units
    prefix system and of 1024 with ``binary``; KiB, MiB, ... are always powers of 1024."""
    if isinstance(text, int):
        return text
    match = _SIZE_TEXT.match(text)
    number, unit = int(match.group(1)), (match.group(2) or "b").lower()
    base = 1024 if unit.endswith("ib") or system == "binary" else 1000
    return number * base ** _POWERS.index(unit[0])


def pr_bytes(n: float, system: str, per: str = "") -> str:
    """Bytes as MACSio prints them (MU_PrByts): Ki, Mi, Gi, ... (binary) or Kb, Mb, Gb, ... (decimal)."""
    base = 1024.0 if system == "binary" else 1000.0
    units = ("Ki", "Mi", "Gi", "Ti", "Pi") if system == "binary" else ("Kb", "Mb", "Gb", "Tb", "Pb")
    for power in range(5, 0, -1):
        if n >= base ** power:
            return f"{n / base ** power:8.4f} {units[power - 1]}{per}"
    return f"{n:8.4f} b{per}"


def pr_secs(seconds: float) -> str:
    """Seconds as MACSio prints them (MU_PrSecs)."""
    for unit, scale in (("wks", 604800.0), ("days", 86400.0), ("hrs", 3600.0), ("mins", 60.0), ("secs", 1.0),
                        ("msecs", 1e-3), ("usecs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:8.4f} {unit}"
    return f"{seconds / 1e-9:8.4f} nsecs"


def pr_bw(n: float, seconds: float, system: str) -> str:
    return pr_bytes(n / seconds if seconds > 0 else 0.0, system, "/sec")


def human(n: float, system: str) -> str:
    """Bytes (or bytes per second) in mebibytes or megabytes, for the summary on standard output."""
    return f"{n / 2**20:.4f} MiB" if system == "binary" else f"{n / 1e6:.4f} MB"


# --- mesh parts (--part_type, --part_dim) ---

def best_2d(n: int) -> tuple[int, int]:
    """MACSio's Best2DFactors: ``x * y == n`` with x the largest divisor not above the square root."""
    x = math.isqrt(n)
    while n % x:
        x -= 1
    return x, n // x


def best_3d(n: int) -> tuple[int, int, int]:
    """``x * y * z == n`` as close to a cube as can be: the largest smallest factor, then the largest
    middle one (x <= y <= z)."""
    best = (1, 1, n)
    for x in range(1, round(n ** (1 / 3)) + 2):
        if n % x == 0:
            y, z = best_2d(n // x)
            cand = tuple(sorted((x, y, z)))
            if cand[:2] > best[:2]:
                best = cand
    return best


def node_dims(nodes: int, dim: int) -> tuple[int, ...]:
    """Nodes along each axis of a ``dim``-dimensional part of ``nodes`` nodes (MACSio's shapes)."""
    return (nodes,) if dim == 1 else best_2d(nodes) if dim == 2 else best_3d(nodes)


def mesh_arrays(kind: str, dim: int, nodes: int, nvars: int) -> list[tuple[str, int]]:
    """The arrays of one mesh part, as (name, bytes), in the order a part is written.

    MACSio sizes a part to the nominal request size: ``N = part_size // 8`` nodes (doubles), shaped
    ``n_1 x ... x n_d`` as close to equal as possible (:func:`node_dims`), with ``Z = prod(max(n_a - 1,
    1))`` zones.  Every value is 8 bytes.  The mesh itself, by ``--part_type`` (the doc's lower bounds
    on the variables a mesh costs: none for uniform and nearly none for rectilinear, d for
    curvilinear, d + 2^d for unstructured):

    - uniform: nothing (an origin and deltas, no bulk data);
    - rectilinear: one coordinate array per axis, ``n_a`` values each (``8 * sum(n_a)`` bytes);
    - curvilinear: ``d`` coordinate arrays of N values (``8 * d * N``);
    - unstructured: the curvilinear coordinates plus a node list of ``2^d`` nodes per zone
      (``8 * (d * N + 2^d * Z)``);
    - arbitrary (polyhedral): the coordinates, then the faces, ``F = sum_a (z_a + 1) * prod_{b != a} z_b``
      with ``z_a = max(n_a - 1, 1)``, as a node list of ``2^(d-1)`` nodes per face and a node count per
      face, then a face list of ``2d`` faces per zone and a face count per zone
      (``8 * (d * N + F * (2^(d-1) + 1) + Z * (2d + 1))``).

    Then the ``--vars-per-part`` variables, cycling through MACSio's eight: variable ``i`` is
    zone-centered (Z values) when ``i % 8`` is 0, 1, 2 or 7, else node-centered (N values).  So a part
    is ``8 * (mesh values + zone variables * Z + node variables * N)`` bytes.
    """
    dims = node_dims(nodes, dim)
    zdims = [max(n - 1, 1) for n in dims]
    zones, axes = math.prod(zdims), "xyz"[:dim]
    arrays: list[tuple[str, int]] = []
    if kind == "rectilinear":
        arrays += [(f"coord_{a}", 8 * n) for a, n in zip(axes, dims)]
    elif kind != "uniform":
        arrays += [(f"coord_{a}", 8 * nodes) for a in axes]
    if kind == "unstructured":
        arrays.append(("nodelist", 8 * zones * 2 ** dim))
    elif kind == "arbitrary":
        faces = sum((zdims[a] + 1) * math.prod(zdims[:a] + zdims[a + 1:]) for a in range(dim))
        arrays += [("nodelist", 8 * faces * 2 ** (dim - 1)), ("nodecnts", 8 * faces),
                   ("facelist", 8 * zones * 2 * dim), ("facecnts", 8 * zones)]
    for i in range(nvars):
        name = VAR_NAMES[i % 8] if i < 8 else f"{VAR_NAMES[i % 8]}_{(i - 8) // 8:03d}"
        arrays.append((name, 8 * (zones if i % 8 in ZONE_VARS else nodes)))
    return arrays


def part_arrays(args: argparse.Namespace, dump: int) -> list[tuple[str, int]]:
    """The arrays (name, bytes) of every part in a dump: ``--vars-per-part`` variables of the part size
    (grown by ``--dataset-growth``), or with ``--part_type`` the mesh part of that many bytes."""
    size = max(1, round(args.part_size * args.dataset_growth ** dump))
    if args.part_type is None:
        return [(f"var{v:03d}", size) for v in range(args.vars_per_part)]
    return mesh_arrays(args.part_type, args.part_dim, max(1, size // 8), args.vars_per_part)


# --- parts per task ---

def deal_parts(nranks: int, total: int, seed: int | None) -> tuple[int, ...]:
    """Parts of each rank: K = total // nranks or K + 1, ``total % nranks`` ranks getting K + 1.
    ``seed`` None: spread evenly in rank order.  Else MACSio's weighted random choice: rank by rank,
    K + 1 with the probability (ranks still owed K + 1) / (ranks left), from a PRNG of ``seed``."""
    k, more = divmod(total, nranks)
    if seed is None:
        return tuple((r + 1) * total // nranks - r * total // nranks for r in range(nranks))
    rng, counts = Rng(seed, 1), []
    for left in range(nranks, 0, -1):
        big = rng.below(left) < more
        more -= big
        counts.append(k + big)
    return tuple(counts)


# --- metadata (--meta_type, --meta_size A B) ---

def tabular(nbytes: int, seed: int) -> list[np.ndarray]:
    """Tables of records, one write each, as the doc's example of 10000 bytes: 60% records of 3
    doubles (24 bytes), 24% named integers (8-char name, 4-byte int), 16% 40-byte structs (2 ints, 4
    doubles); what is left over, a table of characters."""
    gen = np.random.default_rng(seed)
    n3 = int(nbytes * 0.60) // 24
    ni = int(nbytes * 0.24) // 12
    ns = int(nbytes * 0.16) // 40
    named = np.zeros(ni, dtype=[("name", "S8"), ("value", "<i4")])
    named["name"] = [f"key{i:05d}".encode() for i in range(ni)]
    named["value"] = gen.integers(0, 100000, ni)
    structs = np.zeros(ns, dtype=[("a", "<i4"), ("b", "<i4"), ("x", "<f8", (4,))])
    structs["a"], structs["b"], structs["x"] = np.arange(ns), gen.integers(0, 1000, ns), gen.random((ns, 4))
    tables = [gen.random((n3, 3)).astype("<f8"), named, structs]
    tables = [np.frombuffer(t.tobytes(), dtype=np.uint8) for t in tables if len(t)]
    rest = nbytes - sum(len(t) for t in tables)
    if rest:
        tables.append(gen.integers(ord("a"), ord("z") + 1, rest).astype(np.uint8))
    return tables


def amorphous(nbytes: int, seed: int) -> list[np.ndarray]:
    """A random hierarchy of random objects, one write each: a path, then a bool, int, double,
    string or array of doubles, until ``nbytes`` (the last object takes what is left)."""
    rng, gen, out, left, path = Rng(seed, 2), np.random.default_rng(seed), [], nbytes, [0]
    while left:
        depth = rng.below(4) + 1
        path = (path + [0] * depth)[:depth]
        path[-1] += 1
        kind = rng.below(5)
        value = (1, 4, 8, 8 + rng.below(57), 8 * (1 + rng.below(64)))[kind]
        name = ("/" + "/".join(f"o{p}" for p in path) + ":").encode()
        size = min(left, len(name) + value)
        if left - size < 16:
            size = left
        data = gen.integers(0, 256, size).astype(np.uint8)
        data[:min(size, len(name))] = np.frombuffer(name[:size], dtype=np.uint8)
        out.append(data)
        left -= size
    return out


def meta_objects(args: argparse.Namespace, layout: Layout, rank: int, dump: int) -> list[np.ndarray]:
    """The metadata objects ``rank`` writes in a dump (the same every dump without --time_randomize)."""
    if not layout.meta[rank]:
        return []
    key = Rng(args.rand_seed, rank, dump if args.time_randomize else -1).next()
    return (tabular if args.meta_type == "tabular" else amorphous)(layout.meta[rank], key)


@dataclass(frozen=True)
class Layout:
    """Who holds which parts and where every byte of a dump goes (the same on every rank)."""

    nranks: int
    counts: tuple[int, ...]  # parts of each rank
    nfiles: int
    sif: bool
    header_size: int  # bytes of the header the first rank of a group writes (--meta-size with one size)
    meta: tuple[int, ...]  # metadata bytes of each rank (--meta_size A B)

    @cached_property
    def starts(self) -> tuple[int, ...]:
        return tuple(itertools.accumulate(self.counts, initial=0))

    @property
    def total_parts(self) -> int:
        return self.starts[-1]

    def first_part(self, rank: int) -> int:
        return self.starts[rank]

    def num_parts(self, rank: int) -> int:
        return self.counts[rank]

    def group_first_rank(self, index: int) -> int:
        size, extra = divmod(self.nranks, self.nfiles)
        return index * (size + 1) if index < extra else extra * (size + 1) + (index - extra) * size

    def group(self, rank: int) -> tuple[int, int, int]:
        """(file index, first rank, number of ranks) of ``rank``'s group: MACSio's grouping, the first
        ``nranks % nfiles`` groups one rank larger."""
        size, extra = divmod(self.nranks, self.nfiles)
        big = (size + 1) * extra
        index = rank // (size + 1) if rank < big else extra + (rank - big) // size
        return index, self.group_first_rank(index), size + (index < extra)

    def group_parts(self, index: int) -> tuple[int, int]:
        """(first part, number of parts) of file ``index``."""
        first = self.group_first_rank(index)
        n = self.group(first)[2]
        return self.starts[first], self.starts[first + n] - self.starts[first]

    def file_size(self, index: int, sizes: list[int]) -> int:
        """Bytes of file ``index`` of a dump whose part arrays are ``sizes`` bytes."""
        first = self.group_first_rank(index)
        n = self.group(first)[2]
        return self.header_size + self.group_parts(index)[1] * sum(sizes) + sum(self.meta[first:first + n])

    def _base(self, rank: int, sizes: list[int]) -> int:
        """MIF: where ``rank``'s bytes start in its group file (after the ranks before it)."""
        index, first, _ = self.group(rank)
        before = self.first_part(rank) - self.group_parts(index)[0]
        return self.header_size + before * sum(sizes) + sum(self.meta[first:rank])

    def requests(self, rank: int, sizes: list[int]) -> list[tuple[int, int, list[int]]]:
        """``rank``'s write requests of a dump as (offset, array, [part ids]), in the order written."""
        first, n = self.first_part(rank), self.num_parts(rank)
        if self.sif:  # one slab per array: the rank's parts of it, contiguous
            g0, gn = self.group_parts(self.group(rank)[0])
            offsets = itertools.accumulate((gn * s for s in sizes), initial=self.header_size)
            return [(off + (first - g0) * s, j, list(range(first, first + n)))
                    for j, (off, s) in enumerate(zip(offsets, sizes))]
        ends = list(itertools.accumulate(sizes, initial=0))
        base = self._base(rank, sizes)
        return [(base + i * ends[-1] + ends[j], j, [first + i]) for i in range(n) for j in range(len(sizes))]

    def meta_offset(self, rank: int, sizes: list[int]) -> int:
        """Where ``rank``'s metadata goes: after its parts (MIF), after all slabs of the file (SIF)."""
        if not self.sif:
            return self._base(rank, sizes) + self.num_parts(rank) * sum(sizes)
        index, first, _ = self.group(rank)
        return self.header_size + self.group_parts(index)[1] * sum(sizes) + sum(self.meta[first:rank])


def request_data(dump: int, rank: int, var: int, parts: list[int], var_size: int) -> np.ndarray:
    if not parts:
        return np.empty(0, dtype=np.uint8)
    return np.concatenate([pattern(var_size, dump, rank, p, var) for p in parts])


def file_name(args: argparse.Namespace, index: int, dump: int) -> str:
    return os.path.join(args.directory, f"{args.filebase}_mpiio_{index:05d}_{dump:03d}.dat")


def root_name(args: argparse.Namespace, dump: int) -> str:
    return os.path.join(args.directory, f"{args.filebase}_mpiio_root_{dump:03d}.json")


def group_comm(layout: Layout) -> MPI.Intracomm:
    """The communicator of this rank's group (COMM_WORLD itself when there is one file)."""
    return COMM if layout.nfiles == 1 else COMM.Split(layout.group(COMM.Get_rank())[0], COMM.Get_rank())


def write_meta(fh: MPI.File, args: argparse.Namespace, layout: Layout, dump: int, offset: int) -> int:
    """This rank's metadata objects, one independent write each from ``offset``; the bytes written."""
    written = 0
    for obj in meta_objects(args, layout, COMM.Get_rank(), dump):
        fh.Write_at(offset + written, obj)
        written += len(obj)
    return written


def dump_mif(args: argparse.Namespace, layout: Layout, dump: int) -> int:
    """One MIF dump: wait for the baton, append this rank's parts to the group file, pass the baton."""
    rank = COMM.Get_rank()
    index, first, n = layout.group(rank)
    name, sizes = file_name(args, index, dump), [s for _, s in part_arrays(args, dump)]
    written = 0
    if rank == first:
        fh = MPI.File.Open(MPI.COMM_SELF, name, MPI.MODE_WRONLY | MPI.MODE_CREATE)
        fh.Set_size(0)  # a new file, as MACSio's create (fopen "w") makes it
        offset = 0
        if layout.header_size:
            fh.Write_at(0, header(layout.header_size, dump, index, layout.nfiles))
            offset = written = layout.header_size
    else:
        offset = COMM.recv(source=rank - 1, tag=BATON_TAG)
        fh = MPI.File.Open(MPI.COMM_SELF, name, MPI.MODE_WRONLY)
    for off, var, parts in layout.requests(rank, sizes):
        if off != offset:
            raise RuntimeError(f"baton says offset {offset}, layout says {off}")
        data = request_data(dump, rank, var, parts, sizes[var])
        fh.Write_at(off, data)
        offset += len(data)
        written += len(data)
    meta = write_meta(fh, args, layout, dump, offset)
    fh.Close()
    if rank + 1 < first + n:
        COMM.send(offset + meta, dest=rank + 1, tag=BATON_TAG)
    return written + meta


def dump_sif(args: argparse.Namespace, layout: Layout, dump: int) -> int:
    """One SIF dump: the group's first rank writes the header, then one collective (or independent)
    write per array of the parts, then each rank's metadata."""
    rank = COMM.Get_rank()
    index, first, _ = layout.group(rank)
    sizes = [s for _, s in part_arrays(args, dump)]
    comm = group_comm(layout)
    fh = MPI.File.Open(comm, file_name(args, index, dump), MPI.MODE_WRONLY | MPI.MODE_CREATE)
    fh.Set_size(0)  # a new file, as MACSio's create makes it
    written = 0
    if rank == first and layout.header_size:
        fh.Write_at(0, header(layout.header_size, dump, index, layout.nfiles))
        written = layout.header_size
    write = fh.Write_at if args.independent else fh.Write_at_all
    for off, var, parts in layout.requests(rank, sizes):
        data = request_data(dump, rank, var, parts, sizes[var])
        write(off, data)
        written += len(data)
    written += write_meta(fh, args, layout, dump, layout.meta_offset(rank, sizes))
    fh.Close()
    if comm is not COMM:
        comm.Free()
    return written


# --- the root file (--root-file) ---

def root_head(args: argparse.Namespace, layout: Layout, dump: int, arrays: list[tuple[str, int]]) -> str:
    """The root file's text before the part entries: the dump, its files and their parts."""
    sizes = [s for _, s in arrays]
    files = []
    for index in range(layout.nfiles):
        first = layout.group_first_rank(index)
        files.append({"file": file_name(args, index, dump), "bytes": layout.file_size(index, sizes),
                      "tasks": [first, layout.group(first)[2]], "parts": list(layout.group_parts(index))})
    head = {"dump": dump, "mode": args.mode, "total_parts": layout.total_parts,
            "part_arrays": [list(a) for a in arrays], "files": files}
    return json.dumps(head)[:-1] + ', "parts": ['


def root_entries(args: argparse.Namespace, layout: Layout, rank: int, dump: int) -> list[dict]:
    """The root file's entries of ``rank``'s parts: the file and (name, offset, bytes) of each array."""
    arrays = part_arrays(args, dump)
    sizes = [s for _, s in arrays]
    index = layout.group(rank)[0]
    where: dict[int, list] = {p: [None] * len(arrays) for p in range(layout.first_part(rank),
                                                                       layout.first_part(rank + 1))}
    for off, j, parts in layout.requests(rank, sizes):
        for i, p in enumerate(parts):
            where[p][j] = [arrays[j][0], off + i * sizes[j], sizes[j]]
    return [{"part": p, "task": rank, "file": file_name(args, index, dump), "offset": a[0][1] if a else 0,
             "bytes": sum(sizes), "arrays": a} for p, a in where.items()]


def write_root(args: argparse.Namespace, layout: Layout, dump: int) -> int:
    """Every rank writes the entries of its parts into the dump's root file, in part order, with one
    collective write (rank 0 the head before them, the last rank the tail); the bytes written."""
    rank, nranks = COMM.Get_rank(), COMM.Get_size()
    head = root_head(args, layout, dump, part_arrays(args, dump))
    block = "".join((",\n" if e["part"] else "\n") + json.dumps(e)
                    for e in root_entries(args, layout, rank, dump))
    before = COMM.exscan(len(block))
    text = (head if rank == 0 else "") + block + ("\n]}\n" if rank == nranks - 1 else "")
    fh = MPI.File.Open(COMM, root_name(args, dump), MPI.MODE_WRONLY | MPI.MODE_CREATE)
    fh.Set_size(0)
    data = np.frombuffer(text.encode(), dtype=np.uint8)
    fh.Write_at_all(0 if rank == 0 else len(head) + before, data)
    fh.Close()
    return len(data)


def check_root(args: argparse.Namespace, layout: Layout, dump: int) -> tuple[int, int]:
    """Read the dump's root file (rank 0, for everyone) and compare it with the layout: (bytes read,
    entries wrong).  Rank 0 checks the head and that every part is listed once, in order; every rank
    checks its own parts' entries."""
    rank = COMM.Get_rank()
    fh = MPI.File.Open(COMM, root_name(args, dump), MPI.MODE_RDONLY)
    text = b""
    if rank == 0:
        buf = np.empty(fh.Get_size(), dtype=np.uint8)
        fh.Read_at(0, buf)
        text = buf.tobytes()
    fh.Close()
    text = COMM.bcast(text, root=0)
    try:
        doc = json.loads(text)
        parts = doc.pop("parts")
    except (ValueError, KeyError):
        return len(text) if rank == 0 else 0, 1
    expect = json.loads(root_head(args, layout, dump, part_arrays(args, dump)) + "]}")
    expect.pop("parts")
    bad = 0
    if rank == 0:
        bad += (doc != expect) + ([p.get("part") for p in parts] != list(range(layout.total_parts)))
    for entry in root_entries(args, layout, rank, dump):
        p = entry["part"]
        bad += p >= len(parts) or parts[p] != json.loads(json.dumps(entry))
    return len(text) if rank == 0 else 0, bad


def read_back(args: argparse.Namespace, layout: Layout) -> tuple[int, int, int, int, int]:
    """Read every file of every dump and compare: (bytes read, bytes wrong, files of the wrong size,
    root file bytes read, root entries wrong)."""
    rank = COMM.Get_rank()
    index, first, _ = layout.group(rank)
    comm = COMM if layout.nfiles == 1 else COMM.Split(index, rank)
    collective = layout.sif and not args.independent
    nread = bad = bad_files = root_read = root_bad = 0
    for dump in range(args.num_dumps):
        sizes = [s for _, s in part_arrays(args, dump)]
        fh = MPI.File.Open(comm, file_name(args, index, dump), MPI.MODE_RDONLY)
        if rank == first:
            if fh.Get_size() != layout.file_size(index, sizes):
                bad_files += 1
            if layout.header_size:
                expect = header(layout.header_size, dump, index, layout.nfiles)
                buf = np.empty(layout.header_size, dtype=np.uint8)
                fh.Read_at(0, buf)
                nread += len(buf)
                bad += int(np.count_nonzero(buf != expect))
        for off, var, parts in layout.requests(rank, sizes):
            expect = request_data(dump, rank, var, parts, sizes[var])
            buf = np.empty_like(expect)
            (fh.Read_at_all if collective else fh.Read_at)(off, buf)
            nread += len(buf)
            bad += int(np.count_nonzero(buf != expect))
        offset = layout.meta_offset(rank, sizes)
        for expect in meta_objects(args, layout, rank, dump):
            buf = np.empty_like(expect)
            fh.Read_at(offset, buf)
            offset += len(buf)
            nread += len(buf)
            bad += int(np.count_nonzero(buf != expect))
        fh.Close()
        if args.root_file:
            got, wrong = check_root(args, layout, dump)
            root_read += got
            root_bad += wrong
    if comm is not COMM:
        comm.Free()
    return nread, bad, bad_files, root_read, root_bad


# --- compute work between dumps (--compute_work_intensity, --compute_time, --time_randomize) ---

def work_sleep(seconds: float, seed: int) -> str:
    """Level 1: sleep."""
    time.sleep(seconds)
    return "sleep"


def work_flops(seconds: float, seed: int) -> str:
    """Level 2: simple flops on randomly accessed data (gather, multiply-add, scatter of 64 Ki doubles)
    until the time is up."""
    gen = np.random.default_rng(seed)
    x, y = gen.random(1 << 16), gen.random(1 << 16)
    idx = gen.permutation(len(x))
    end, sweeps = time.perf_counter() + seconds, 0
    while True:
        x[idx] = x[idx] * 0.999 + 0.001 * y
        sweeps += 1
        if time.perf_counter() >= end:
            return f"{2 * sweeps * len(x)} flops"


def work_jacobi(seconds: float, seed: int) -> str:
    """Level 3: Jacobi sweeps of the 2D Poisson equation (-laplace u = 1, u = 0 on the boundary) on a
    64 x 64 grid until the time is up."""
    n = 64
    u, h2 = np.zeros((n + 2, n + 2)), 1.0 / (n + 1) ** 2
    end, sweeps = time.perf_counter() + seconds, 0
    while True:
        u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] + h2)
        sweeps += 1
        if time.perf_counter() >= end:
            return f"{sweeps} Jacobi sweeps"


WORK = {1: work_sleep, 2: work_flops, 3: work_jacobi}


def compute_work(args: argparse.Namespace, dump: int, log: Log, timers: Timers) -> None:
    """The work before dump ``dump``: ``--compute-time`` seconds (times 0.5 to 1.5, at random per rank
    and dump, with --time_randomize) of the work of ``--compute_work_intensity``; logged as MACSio does."""
    rank, seconds = COMM.Get_rank(), args.compute_time
    if args.time_randomize:
        seconds *= 0.5 + Rng(args.rand_seed, 3, dump, rank).uniform()
    begin, t0 = time.time(), time.perf_counter()
    with timers.time("compute work"):
        what = WORK[args.compute_work_intensity](seconds, Rng(args.rand_seed, 4, dump, rank).next())
    level, took = args.compute_work_intensity, time.perf_counter() - t0
    log.msg(f"Work phase: Level {level}: Begin {stamp(begin)} - End {stamp(time.time())}: "
            f"Duration {took:.4f} sec: {what}")


def stamp(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"


# --- MACSio's log and timers (macsio-log.log, macsio-timings.log) ---

class Log:
    """MACSio's log: one text file with a group of fixed-length lines per task (rank 0's first, with
    its extra lines), each under a header line; every task writes its messages round-robin into its
    own group with pwrite (as MACSio, no MPI-IO), so a task can log at any time.  Created collectively."""

    def __init__(self, path: str, line_len: int, lines: int, extra: int) -> None:
        rank, nranks = COMM.Get_rank(), COMM.Get_size()
        self.line_len, self.lines, self.count = line_len, lines + (extra if rank == 0 else 0), 0
        self.start = 0 if rank == 0 else (1 + lines + extra + (rank - 1) * (1 + lines)) * line_len
        if rank == 0:
            with open(path, "wb") as f:
                for r in range(nranks):
                    f.write(self._line(f" Processor {r:06d} ".center(line_len - 1, "-")))
                    f.write(self._line("") * (lines + (extra if r == 0 else 0)))
        COMM.Barrier()
        self.fd = os.open(path, os.O_WRONLY)

    def _line(self, text: str) -> bytes:
        return (text.replace("\n", "!")[:self.line_len - 1].ljust(self.line_len - 1) + "\n").encode("ascii",
                                                                                                    "replace")

    def raw(self, text: str) -> None:
        os.pwrite(self.fd, self._line(text), self.start + (1 + self.count % self.lines) * self.line_len)
        self.count += 1

    def msg(self, text: str, severity: str = "Info") -> None:
        """A message with MACSio's leader: severity, source file and line."""
        self.raw(f'{severity}:"macsio.py":{inspect.currentframe().f_back.f_lineno}:{text}:::')

    def close(self) -> None:
        os.close(self.fd)


class NoLog(Log):
    """The log when its file name is empty."""

    def __init__(self) -> None:
        pass

    def raw(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


class Timers:
    """MACSio's timers: per label, every iteration's time folded into count, total, min, max, mean and
    variance (Welford's online algorithm)."""

    def __init__(self) -> None:
        self.stats: dict[str, list[float]] = {}  # label: [count, total, min, max, mean, M2]

    def add(self, label: str, dt: float) -> None:
        s = self.stats.setdefault(label, [0, 0.0, math.inf, -math.inf, 0.0, 0.0])
        s[0] += 1
        s[1] += dt
        s[2], s[3] = min(s[2], dt), max(s[3], dt)
        delta = dt - s[4]
        s[4] += delta / s[0]
        s[5] += delta * (dt - s[4])

    @contextmanager
    def time(self, label: str) -> Iterator[None]:
        t0 = MPI.Wtime()
        try:
            yield
        finally:
            self.add(label, MPI.Wtime() - t0)


def timer_line(label: str, count: int, total: float, low: tuple[float, int], high: tuple[float, int],
               var: float) -> str:
    """One timer as MACSio dumps it (TOT, CNT, MIN with its distance from the mean in standard
    deviations and its rank, AVG, MAX likewise, DEV), plus VAR, the variance."""
    mean, dev = total / count, math.sqrt(var)
    sd = (lambda t: abs(t - mean) / dev) if dev > 0 else (lambda t: 0.0)
    return (f"TOT={total:10.5f},CNT={count:04d},MIN={low[0]:8.5f}({sd(low[0]):4.2f}):{low[1]:06d},"
            f"AVG={mean:8.5f},MAX={high[0]:8.5f}({sd(high[0]):4.2f}):{high[1]:06d},DEV={dev:.8f},"
            f"VAR={var:.6e}:FILE=macsio.py:LAB={label}")


def reduce_timers(timers: Timers) -> list[str] | None:
    """The timers reduced over the tasks, on rank 0 (None elsewhere): counts and totals summed, the
    min and max over every iteration of every task (with the task), the mean over them all and their
    variance (the tasks' variances combined: sum of M2 + n (mean_task - mean)^2, over the count)."""
    every = COMM.gather({k: (*v, COMM.Get_rank()) for k, v in timers.stats.items()}, root=0)
    if every is None:
        return None
    lines = []
    for label in sorted({k for stats in every for k in stats}):
        mine = [s[label] for s in every if label in s]
        count, total = sum(s[0] for s in mine), sum(s[1] for s in mine)
        mean = total / count
        m2 = sum(s[5] + s[0] * (s[4] - mean) ** 2 for s in mine)
        lines.append(timer_line(label, count, total, min((s[2], s[6]) for s in mine),
                                max((s[3], s[6]) for s in mine), max(m2 / count, 0.0)))
    return lines


def write_timings(args: argparse.Namespace, timers: Timers) -> None:
    """macsio-timings.log: each task's timers in its group of lines, then on rank 0 the reduced ones."""
    if not args.timings_file_name:
        return
    rank = COMM.Get_rank()
    mine = [timer_line(k, int(s[0]), s[1], (s[2], rank), (s[3], rank), s[5] / s[0])
            for k, s in sorted(timers.stats.items())]
    reduced = reduce_timers(timers) or []
    width, nmine, nreduced = _maxes(mine, reduced)
    log = Log(os.path.join(args.log_dir, args.timings_file_name), width + 32, nmine, nreduced + 1)
    for line in mine:
        log.msg(line)
    if rank == 0:
        log.raw("Reduced Timers...")
        for line in reduced:
            log.msg(line)
    log.close()


def _maxes(mine: list[str], reduced: list[str]) -> tuple[int, int, int]:
    """Over the tasks: the longest timer line, the most timers, the reduced timers' count."""
    width = COMM.allreduce(max(map(len, mine + reduced), default=0), op=MPI.MAX)
    return width, COMM.allreduce(len(mine), op=MPI.MAX), COMM.allreduce(len(reduced), op=MPI.MAX)


def open_log(args: argparse.Namespace) -> Log:
    if not args.log_file_name:
        return NoLog()
    if COMM.Get_rank() == 0:
        os.makedirs(args.log_dir, exist_ok=True)
    COMM.Barrier()
    return Log(os.path.join(args.log_dir, args.log_file_name), args.log_line_length, *args.log_line_cnt)


# --- options ---

def optimum_files(args: argparse.Namespace, nranks: int) -> int:
    """MIFOPT's file count.  MACSio's docs advise matching the files to the independent I/O pathways
    between the tasks and the file system (MACSio itself leaves MIFOPT unimplemented): the I/O servers
    a new file in ``--directory`` is striped over (its ``striping_factor`` hint), at most one file per
    task.  Without that hint, the file counts of the doc's weak-scaling study: 32 up to 32 tasks, 64 up
    to 8192, 128 up to 65536, 256 beyond."""
    factor = None
    if COMM.Get_rank() == 0:
        name = os.path.join(args.directory, f"{args.filebase}_mpiio_probe")
        fh = MPI.File.Open(MPI.COMM_SELF, name, MPI.MODE_WRONLY | MPI.MODE_CREATE | MPI.MODE_DELETE_ON_CLOSE)
        info = fh.Get_info()
        factor = info.Get("striping_factor")
        info.Free()
        fh.Close()
    factor = COMM.bcast(factor, root=0)
    if factor and factor.isdigit() and int(factor) > 0:
        return min(nranks, int(factor))
    table = 32 if nranks <= 32 else 64 if nranks <= 8192 else 128 if nranks <= 65536 else 256
    return min(nranks, table)


def parse_sizes(parser: Parser, args: argparse.Namespace) -> None:
    """Read --part-size and --meta-size in the units of --units_prefix_system; check --meta-size."""
    args.part_size = parse_macsio_size(args.part_size, args.units_prefix_system)
    meta = [parse_macsio_size(m, args.units_prefix_system) for m in args.meta_size]
    if len(meta) > 2:
        parser.error(f"--meta-size: expected one size (a header per file) or two (MACSio's metadata per task "
                     f"and more on task 0), got {len(meta)}")
    args.header_size, args.task_meta = (meta[0], (0, 0)) if len(meta) == 1 else (0, tuple(meta))


def parse_args(parser: Parser) -> tuple[argparse.Namespace, Layout]:
    """Parse and check the options; the layout they give on this many ranks."""
    args = parser.parse_args()
    rank, nranks = COMM.Get_rank(), COMM.Get_size()
    mode = [m.upper() for m in args.parallel_file_mode]
    if mode[0] in ("MIF", "SIF") and len(mode) == 2 and mode[1].isdigit() and int(mode[1]) >= 1:
        nfiles = int(mode[1])
    elif mode in (["SIF"], ["MIFFPP"], ["MIFOPT"]):
        nfiles = {"SIF": 1, "MIFFPP": nranks, "MIFOPT": 0}[mode[0]]
    else:
        parser.error(f"--parallel-file-mode: expected 'MIF N' (N >= 1), 'MIFFPP' or 'SIF', "
                     f"got {' '.join(args.parallel_file_mode)!r}")
    parse_sizes(parser, args)
    for name, low in (("avg_num_parts", 0), ("part_size", 1), ("vars_per_part", 1), ("num_dumps", 1),
                      ("dataset_growth", 1), ("compute_time", 0)):
        value = getattr(args, name)
        if value < low or (name == "avg_num_parts" and value == 0):
            rel = "> 0" if name == "avg_num_parts" else f">= {low}"
            parser.error(f"--{name.replace('_', '-')} must be {rel}, got {value}")
    if args.part_dim is not None or args.part_type is not None:
        args.part_type, args.part_dim = args.part_type or "rectilinear", args.part_dim or 2
        if args.part_size < 8:
            parser.error(f"--part-size: a mesh part needs at least one node (8 bytes), got {args.part_size}")
    if min(args.log_line_cnt) < 0 or args.log_line_cnt[0] < 1 or args.log_line_length < 32:
        parser.error("--log_line_cnt: at least 1 line per task (and 0 or more extra); --log_line_length: "
                     "at least 32")
    total = round(args.avg_num_parts * nranks)
    if total < 1:
        parser.error(f"--avg-num-parts {args.avg_num_parts} on {nranks} ranks gives no part")
    args.notes = []
    if abs(total - args.avg_num_parts * nranks) > 1e-9:
        args.notes.append(f"{args.avg_num_parts} parts x {nranks} ranks rounded to {total} parts")
    if mode[0] == "MIFOPT":
        nfiles = optimum_files(args, nranks)
    if nfiles > nranks:
        args.notes.append(f"{mode[0]} {nfiles} on {nranks} ranks: writing {nranks} files")
        nfiles = nranks
    for note in args.notes:
        if rank == 0:
            print(f"{parser.prog}: note: {note}", file=sys.stderr)
    args.rand_seed = META_SEED
    if args.time_randomize:
        args.rand_seed = COMM.bcast(time.time_ns() & M64 if rank == 0 else None)
    seed = args.part_seed if args.part_seed is not None else args.rand_seed if args.time_randomize else None
    sif = mode[0] == "SIF"
    meta = tuple(args.task_meta[0] + (args.task_meta[1] if r == 0 else 0) for r in range(nranks))
    layout = Layout(nranks, deal_parts(nranks, total, seed), nfiles, sif, args.header_size, meta)
    args.mode = {"SIF": "SIF" if nfiles == 1 else f"SIF {nfiles}", "MIF": f"MIF {nfiles}",
                 "MIFFPP": f"MIFFPP ({nfiles} files)", "MIFOPT": f"MIFOPT ({nfiles} files)"}[mode[0]]
    if sif and args.independent:
        args.mode += " (independent writes)"
    return args, layout


def make_parser() -> Parser:
    parser = Parser(prog="macsio.py", description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--parallel-file-mode", "--parallel_file_mode", nargs="+", default=["MIF", "4"], metavar="MODE",
        help="'MIF N': N files, one per group of ranks, written in turn (baton passing); 'MIFFPP': one "
             "file per rank; 'MIFOPT': MIF with one file per I/O server; 'SIF': one shared file, "
             "collective writes; 'SIF N': N shared files, one per group (default MIF 4)")
    add("--sif-independent", "--sif_independent", "--no_collective", "--no-collective", action="store_true",
        dest="independent", help="SIF: independent writes (and reads) instead of collective ones")
    add("--part-size", "--part_size", type=size_text, default=80000, metavar="SIZE",
        help="bytes of each variable of a part, the nominal request size; K, M, G per "
             "--units_prefix_system (default 80000)")
    add("--part-type", "--part_type", choices=PART_TYPES, default=None,
        help="write real mesh parts of this type (default: none, every variable --part-size bytes)")
    add("--part-dim", "--part_dim", type=int, choices=(1, 2, 3), default=None,
        help="spatial dimension of the mesh parts (default 2 with --part_type)")
    add("--avg-num-parts", "--avg_num_parts", type=float, default=1.0, metavar="F",
        help="average parts per rank; fractional: some ranks get one more (default 1)")
    add("--part-seed", "--part_seed", type=int, default=None, metavar="SEED",
        help="deal K or K+1 parts per rank at random (MACSio's weighted choice) from SEED "
             "(default: evenly, in rank order)")
    add("--vars-per-part", "--vars_per_part", type=int, default=20, metavar="N",
        help="variables per part, one write request each (default 20)")
    add("--num-dumps", "--num_dumps", type=int, default=10, metavar="N", help="dumps to write (default 10)")
    add("--dataset-growth", "--dataset_growth", type=float, default=1.0, metavar="F",
        help="factor by which the part size grows from one dump to the next (default 1: no growth)")
    add("--compute-time", "--compute_time", type=float, default=0.0, metavar="SECONDS",
        help="seconds of simulated compute between dumps (default 0)")
    add("--compute-work-intensity", "--compute_work_intensity", type=int, choices=(1, 2, 3), default=1,
        help="the compute: 1 sleep, 2 flops on randomly accessed data, 3 Jacobi sweeps (default 1)")
    add("--time-randomize", "--time_randomize", action="store_true",
        help="randomness seeded by the clock, varying by dump: compute times (x 0.5 to 1.5), parts per rank, "
             "metadata")
    add("--meta-size", "--meta_size", type=size_text, nargs="+", default=[10000], metavar="SIZE",
        help="one size: bytes of the header the first rank of each file writes per dump (0: none); two "
             "(MACSio's): metadata bytes each task writes per dump, and more on task 0 (default 10000)")
    add("--meta-type", "--meta_type", choices=("tabular", "amorphous"), default="tabular",
        help="metadata with --meta_size A B: tables of records, or a random hierarchy of objects")
    add("--units-prefix-system", "--units_prefix_system", choices=("binary", "decimal"), default="binary",
        help="K, M, G in sizes and in the printed sizes: powers of 1024 (binary) or 1000 (default binary)")
    add("--root-file", "--root_file", action=argparse.BooleanOptionalAction, default=False,
        help="write (and check) each dump's root file saying where every part is (default off)")
    add("--filebase", default="macsio", help="first part of the file names (default macsio)")
    add("--directory", default="/pvfs2", help="directory of the files (default /pvfs2, the simulated file "
        "system under callid run)")
    add("--log-dir", "--log_dir", default=".", metavar="DIR",
        help="directory of the log and timings files (default: the working directory)")
    add("--log-file-name", "--log_file_name", default="macsio-log.log", metavar="NAME",
        help="the log file ('' for none; default macsio-log.log)")
    add("--timings-file-name", "--timings_file_name", default="macsio-timings.log", metavar="NAME",
        help="the timings file ('' for none; default macsio-timings.log)")
    add("--log-line-cnt", "--log_line_cnt", type=int, nargs=2, default=[64, 0], metavar=("N", "EXTRA"),
        help="log lines per task and extra lines for task 0 (default 64 0)")
    add("--log-line-length", "--log_line_length", type=int, default=128, metavar="N",
        help="length of a log line (default 128)")
    add("--read-back", action=argparse.BooleanOptionalAction, default=True,
        help="after the dumps, read every file back and check every byte (default on)")
    return parser


def describe(args: argparse.Namespace, layout: Layout) -> list[str]:
    """Rank 0's lines saying what the run writes."""
    nranks = COMM.Get_size()
    size = f"x {args.part_size} bytes" if args.part_type is None else f"on mesh parts of {args.part_size} B"
    lines = [f"macsio: {args.mode}, {nranks} ranks, {args.num_dumps} dumps, {layout.total_parts} parts x "
             f"{args.vars_per_part} vars {size} (growth {args.dataset_growth:g})"]
    if args.part_type:
        arrays = part_arrays(args, 0)
        dims = "x".join(map(str, node_dims(max(1, args.part_size // 8), args.part_dim)))
        lines.append(f"macsio: {args.part_dim}D {args.part_type} mesh parts of {dims} nodes: {len(arrays)} "
                     f"arrays, {sum(s for _, s in arrays)} bytes per part")
    lines.append("macsio: parts per task: " + " ".join(map(str, layout.counts)))
    if any(layout.meta):
        lines.append(f"macsio: {args.meta_type} metadata: {args.task_meta[0]} bytes per task, "
                     f"{sum(args.task_meta)} on task 0")
    return lines


def summary(args: argparse.Namespace, layout: Layout, totals: tuple[int, int, float],
            checked: tuple[int, ...] | None) -> list[str]:
    """Rank 0's lines of totals and verdict."""
    total, root_total, elapsed = totals
    units = args.units_prefix_system
    data_files = layout.nfiles * args.num_dumps
    nfiles = data_files + (args.num_dumps if args.root_file else 0)
    everything = total + root_total
    lines = [f"macsio: total bytes {everything} ({human(everything, units)}) in {nfiles} files; "
             f"last finisher - first starter = {elapsed:.4f} s; BW = {human(everything / elapsed, units)}/s"]
    if checked is None:
        return lines + ["macsio: read-back skipped"]
    nread, bad, bad_files, root_read, root_bad = checked
    if bad == 0 and bad_files == 0 and nread == total:
        lines.append(f"macsio: read-back OK ({nread} bytes in {data_files} files)")
    else:
        lines.append(f"macsio: read-back FAILED ({bad} of {nread} bytes wrong, {bad_files} files of the "
                     f"wrong size, {total} bytes written)")
    if args.root_file:
        verdict = "OK" if root_bad == 0 and root_read == root_total else "FAILED"
        lines.append(f"macsio: root files {verdict} ({args.num_dumps} files, {root_read} bytes, "
                     f"{layout.total_parts} parts each, {root_bad} entries wrong)")
    return lines


def main() -> int:
    parser = make_parser()
    args, layout = parse_args(parser)
    t_main = MPI.Wtime()
    rank, units = COMM.Get_rank(), args.units_prefix_system
    timers, log = Timers(), open_log(args)
    for note in args.notes:
        log.msg(note, "Warn")
    if rank == 0:
        print("\n".join(describe(args, layout)))
    dump = dump_sif if layout.sif else dump_mif
    written = root_written = 0
    COMM.Barrier()
    start = MPI.Wtime()
    for d in range(args.num_dumps):
        if d and args.compute_time:
            compute_work(args, d, log, timers)
        t0 = MPI.Wtime()
        with timers.time("heavy dump"):
            n = dump(args, layout, d)
            r = write_root(args, layout, d) if args.root_file else 0
        dt = MPI.Wtime() - t0
        log.msg(f"Dump {d:02d} BW: {pr_bytes(n + r, units)}/{pr_secs(dt)} = {pr_bw(n + r, dt, units)}")
        written, root_written = written + n, root_written + r
    end = MPI.Wtime()
    mine = written + root_written
    log.msg(f"Overall BW: {pr_bytes(mine, units)}/{pr_secs(end - start)} = {pr_bw(mine, end - start, units)}")
    first_start = COMM.allreduce(start, op=MPI.MIN)
    last_finish = COMM.allreduce(end, op=MPI.MAX)
    total, root_total = COMM.allreduce(written, op=MPI.SUM), COMM.allreduce(root_written, op=MPI.SUM)
    summed_bw = COMM.allreduce(mine / (end - start), op=MPI.SUM)
    checked = None
    if args.read_back:
        COMM.Barrier()
        with timers.time("read back"):
            checked = tuple(COMM.allreduce(x, op=MPI.SUM) for x in read_back(args, layout))
    elapsed = last_finish - first_start
    ok = checked is None or (checked[1] == 0 and checked[2] == 0 and checked[0] == total and checked[4] == 0
                             and checked[3] == root_total)
    if rank == 0:
        print("\n".join(summary(args, layout, (total, root_total, elapsed), checked)))
        log.msg(f"Summed  BW: {pr_bytes(summed_bw, units, '/sec')}")
        log.msg(f"Total Bytes: {pr_bytes(total + root_total, units)}; Last finisher - First starter = "
                f"{pr_secs(elapsed)}; BW = {pr_bw(total + root_total, elapsed, units)}")
        if checked is not None:
            log.msg(f"Read-back {'OK' if ok else 'FAILED'}", "Info" if ok else "Err")
    timers.add("main", MPI.Wtime() - t_main)
    write_timings(args, timers)
    log.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
