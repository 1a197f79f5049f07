"""Write real Darshan logs (binary ``.darshan``, log format 3.41) with DXT traces, of any size.

No darshan-runtime needed: :func:`write_log` lays out what darshan-util 3.5 reads (PyDarshan's
``libdarshan-util``): an uncompressed header (version, magic number, compression, the map of
regions, module versions), then zlib streams for the job record (+ exe and mount table), the
name records (record id -> path) and one region per module, in module-id order:
``POSIX`` (v4), ``MPI-IO`` (v3), ``STDIO`` (v2), ``DXT_POSIX`` (v1), ``DXT_MPIIO`` (v2).  Segments arrive as
columns (:class:`Segments`) and are packed with numpy, not a Python loop per segment.

:func:`synthetic_dxt_log` makes an IOR-like log: every rank writes ``accesses`` blocks to a
shared file (or one file per process), reads them back, collectively or not; DXT_MPIIO holds
the MPI-IO calls, DXT_POSIX the system calls under them (for collectives, as ROMIO's two-phase
I/O issues them: from one aggregator per node, cut at file-domain and ``cb_buffer_size``
boundaries).

``python -m bench.darshan_log OUT.darshan --ranks 4096 --accesses 16 --size 1MiB``
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import struct
import sys
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from callid_core.darshan_file import MAGIC
from callid_core.units import parse_duration, parse_size

LOG_VERSION = "3.41"  # DARSHAN_LOG_VERSION of darshan 3.4.x / 3.5.x
MAX_MODS = 64
HEADER_SIZE = 1328  # sizeof(struct darshan_header) with 64 module slots and a 64-bit partial flag
JOB_RECORD_SIZE = 4096  # job struct + exe + mount table, decompressed
JOB_STRUCT_SIZE = 7 * 8 + 1024  # uid, start sec/nsec, end sec/nsec, nprocs, jobid, metadata[1024]
ZLIB_COMP = 0  # DARSHAN_ZLIB_COMP
MAX_RECORD_BYTES = (1 << 31) - 1  # darshan-util reads a record with an int length

#: module name -> (module id in the header's region map, format version)
MODULES = {"POSIX": (1, 4), "MPI-IO": (2, 3), "STDIO": (9, 2), "DXT_POSIX": (10, 1), "DXT_MPIIO": (11, 2)}

_BUCKETS = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M",
            "100M_1G", "1G_PLUS")
_BUCKET_LIMITS = np.array([101, 1025, 10241, 102401, 1048577, 4194305, 10485761, 104857601, 1073741825])
_FTIMES = ("OPEN_START_TIMESTAMP", "READ_START_TIMESTAMP", "WRITE_START_TIMESTAMP", "CLOSE_START_TIMESTAMP",
           "OPEN_END_TIMESTAMP", "READ_END_TIMESTAMP", "WRITE_END_TIMESTAMP", "CLOSE_END_TIMESTAMP",
           "READ_TIME", "WRITE_TIME", "META_TIME", "MAX_READ_TIME", "MAX_WRITE_TIME", "FASTEST_RANK_TIME",
           "SLOWEST_RANK_TIME", "VARIANCE_RANK_TIME", "VARIANCE_RANK_BYTES")
_TOP4 = [f"ACCESS{i}_ACCESS" for i in range(1, 5)] + [f"ACCESS{i}_COUNT" for i in range(1, 5)]
_RANKS = ["FASTEST_RANK", "FASTEST_RANK_BYTES", "SLOWEST_RANK", "SLOWEST_RANK_BYTES"]

#: counter names of MPI-IO v3 and POSIX v4, in record order (darshan-mpiio/posix-log-format.h)
MPIIO_COUNTERS = tuple("MPIIO_" + n for n in [
    "INDEP_OPENS", "COLL_OPENS", "INDEP_READS", "INDEP_WRITES", "COLL_READS", "COLL_WRITES", "SPLIT_READS",
    "SPLIT_WRITES", "NB_READS", "NB_WRITES", "SYNCS", "HINTS", "VIEWS", "MODE", "BYTES_READ", "BYTES_WRITTEN",
    "RW_SWITCHES", "MAX_READ_TIME_SIZE", "MAX_WRITE_TIME_SIZE", *[f"SIZE_READ_AGG_{b}" for b in _BUCKETS],
    *[f"SIZE_WRITE_AGG_{b}" for b in _BUCKETS], *_TOP4, *_RANKS])
MPIIO_FCOUNTERS = tuple("MPIIO_F_" + n for n in _FTIMES)
POSIX_COUNTERS = tuple("POSIX_" + n for n in [
    "OPENS", "FILENOS", "DUPS", "READS", "WRITES", "SEEKS", "STATS", "MMAPS", "FSYNCS", "FDSYNCS",
    "RENAME_SOURCES", "RENAME_TARGETS", "RENAMED_FROM", "MODE", "BYTES_READ", "BYTES_WRITTEN",
    "MAX_BYTE_READ", "MAX_BYTE_WRITTEN", "CONSEC_READS", "CONSEC_WRITES", "SEQ_READS", "SEQ_WRITES",
    "RW_SWITCHES", "MEM_NOT_ALIGNED", "MEM_ALIGNMENT", "FILE_NOT_ALIGNED", "FILE_ALIGNMENT",
    "MAX_READ_TIME_SIZE", "MAX_WRITE_TIME_SIZE", *[f"SIZE_READ_{b}" for b in _BUCKETS],
    *[f"SIZE_WRITE_{b}" for b in _BUCKETS], *[f"STRIDE{i}_STRIDE" for i in range(1, 5)],
    *[f"STRIDE{i}_COUNT" for i in range(1, 5)], *_TOP4, *_RANKS])
POSIX_FCOUNTERS = tuple("POSIX_F_" + n for n in _FTIMES)
#: STDIO v2 (darshan-stdio-log-format.h)
STDIO_COUNTERS = tuple("STDIO_" + n for n in [
    "OPENS", "FDOPENS", "READS", "WRITES", "SEEKS", "FLUSHES", "BYTES_WRITTEN", "BYTES_READ", "MAX_BYTE_READ",
    "MAX_BYTE_WRITTEN", *_RANKS])
STDIO_FCOUNTERS = tuple("STDIO_F_" + n for n in [
    "META_TIME", "WRITE_TIME", "READ_TIME", "OPEN_START_TIMESTAMP", "CLOSE_START_TIMESTAMP",
    "WRITE_START_TIMESTAMP", "READ_START_TIMESTAMP", "OPEN_END_TIMESTAMP", "CLOSE_END_TIMESTAMP",
    "WRITE_END_TIMESTAMP", "READ_END_TIMESTAMP", "FASTEST_RANK_TIME", "SLOWEST_RANK_TIME",
    "VARIANCE_RANK_TIME", "VARIANCE_RANK_BYTES"])
_NAMES = {"MPI-IO": (MPIIO_COUNTERS, MPIIO_FCOUNTERS), "POSIX": (POSIX_COUNTERS, POSIX_FCOUNTERS),
          "STDIO": (STDIO_COUNTERS, STDIO_FCOUNTERS)}

#: struct dxt_file_record (104 bytes) and struct segment_info (32 bytes)
DXT_RECORD = np.dtype([("id", "<u8"), ("rank", "<i8"), ("shared_record", "<i8"), ("hostname", "S64"),
                       ("write_count", "<i8"), ("read_count", "<i8")])
DXT_SEGMENT = np.dtype([("offset", "<i8"), ("length", "<i8"), ("start_time", "<f8"), ("end_time", "<f8")])
_CHUNK = 16 << 20


def record_id(path: str) -> int:
    """The 64-bit record id of ``path`` (a stable hash; darshan's own is Jenkins', any will do)."""
    return int.from_bytes(hashlib.blake2b(path.encode(), digest_size=8).digest(), "little") or 1


#: what a module's operation counts are named by: one kind for all (``COLL``: MPIIO_COLL_WRITES; ``""``:
#: POSIX_WRITES), or each kind with the segments it counts (a mask)
Kinds = str | dict[str, np.ndarray]


@dataclass
class Counters:
    """Records of a counter module (``MPI-IO``, ``POSIX``), one row per record; columns broadcast.

    ``file`` indexes ``files`` of :func:`write_log`; ``rank`` -1 is a shared (reduced) record;
    ``counters`` / ``fcounters`` map full counter names (``MPIIO_COLL_WRITES``) to values.
    """

    file: ArrayLike
    rank: ArrayLike
    counters: Mapping[str, ArrayLike] = field(default_factory=dict)
    fcounters: Mapping[str, ArrayLike] = field(default_factory=dict)

    def __post_init__(self) -> None:
        file, rank = np.broadcast_arrays(np.asarray(self.file, np.int64), np.asarray(self.rank, np.int64))
        self.file, self.rank = file.ravel().copy(), rank.ravel().copy()

    def __len__(self) -> int:
        return len(self.file)


@dataclass
class Segments:
    """DXT segments of one module, one row per traced operation; columns broadcast.

    ``file`` indexes ``files`` of :func:`write_log`; times are seconds since the job's start.
    A record holds one (file, rank)'s writes then reads, each in the order given here.
    """

    file: ArrayLike
    rank: ArrayLike
    offset: ArrayLike
    length: ArrayLike
    start: ArrayLike
    end: ArrayLike
    is_read: ArrayLike = False

    _TYPES = {"file": np.int64, "rank": np.int64, "offset": np.int64, "length": np.int64,
              "start": np.float64, "end": np.float64, "is_read": np.bool_}

    def __post_init__(self) -> None:
        cols = np.broadcast_arrays(*(np.asarray(getattr(self, k), t) for k, t in self._TYPES.items()))
        for k, col in zip(self._TYPES, cols):
            setattr(self, k, np.ascontiguousarray(col).ravel())

    def __len__(self) -> int:
        return len(self.file)

    @classmethod
    def concat(cls, parts: Sequence[Segments]) -> Segments:
        """All ``parts`` one after the other."""
        if not parts:
            return cls([], [], [], [], [], [])
        return cls(**{k: np.concatenate([getattr(p, k) for p in parts]) for k in cls._TYPES})


@dataclass(frozen=True)
class LogInfo:
    """What :func:`write_log` wrote."""

    path: str
    nprocs: int
    files: int
    records: dict[str, int]
    segments: dict[str, int]
    size: int  # bytes on disk


def write_log(path: str | os.PathLike, *, nprocs: int, exe: str, start_time: float, end_time: float,
              files: Sequence[str], mpiio: Counters | None = None, dxt_mpiio: Segments | None = None,
              dxt_posix: Segments | None = None, posix: Counters | None = None, stdio: Counters | None = None,
              metadata: Mapping[str, str] | None = None, uid: int = 0, jobid: int = 0,
              mounts: Sequence[tuple[str, str]] = (("/", "rootfs"),),
              hostnames: str | Sequence[str] = "localhost", compress_level: int = 1,
              partial: Sequence[str] = ()) -> LogInfo:
    """Write a Darshan log to ``path`` (through a temporary name, renamed at the end).

    ``start_time`` / ``end_time`` are Unix seconds; ``files`` the paths records refer to by index;
    ``mounts`` (mount point, fs type) pairs, at least one (darshan-util finds the exe before the
    first mount line); ``hostnames`` one for all ranks or one per rank (DXT records); ``partial`` the
    modules the header flags as incomplete (as darshan-runtime does when a module ran out of memory).
    """
    path = Path(path)
    if not files or len(set(files)) != len(files):
        raise ValueError("files must be distinct paths, at least one")
    ids = np.array([record_id(p) for p in files], np.uint64)
    if len(np.unique(ids)) != len(ids):
        raise ValueError("two files hash to the same record id")
    hosts = np.array([hostnames] * nprocs if isinstance(hostnames, str) else list(hostnames), dtype=object)
    if len(hosts) != nprocs or any(len(h.encode()) >= 64 for h in hosts):
        raise ValueError("hostnames: one per rank (or one for all), each shorter than 64 bytes")
    host_bytes = np.array([h.encode() for h in hosts], "S64")
    regions: list[tuple[int, int, np.ndarray | bytes]] = []  # (module id, version, data)
    records: dict[str, int] = {}
    segments: dict[str, int] = {}
    for name, table in (("POSIX", posix), ("MPI-IO", mpiio), ("STDIO", stdio)):
        if table is not None and len(table):
            regions.append((*MODULES[name], _pack_counters(name, table, ids, len(files))))
            records[name] = len(table)
    for name, segs in (("DXT_POSIX", dxt_posix), ("DXT_MPIIO", dxt_mpiio)):
        if segs is not None and len(segs):
            data, n = _pack_dxt(segs, ids, host_bytes, nprocs)
            regions.append((*MODULES[name], data))
            records[name], segments[name] = n, len(segs)

    job = _job_region(nprocs, exe, start_time, end_time, metadata or {}, uid, jobid, mounts)
    names = b"".join(struct.pack("<Q", int(i)) + _path_bytes(p) for i, p in zip(ids, files))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as out:
            out.write(bytes(HEADER_SIZE))
            _deflate(out, job, compress_level)
            name_map = (out.tell(), _deflate(out, names, compress_level))
            mod_map = np.zeros((MAX_MODS, 2), "<u8")
            mod_ver = np.zeros(MAX_MODS, "<u4")
            for mod_id, version, data in regions:
                mod_map[mod_id] = out.tell(), _deflate(out, data, compress_level)
                mod_ver[mod_id] = version
            out.seek(0)
            flags = sum(1 << MODULES[m][0] for m in set(partial))
            out.write(struct.pack("<8sqB7xQ2Q", LOG_VERSION.encode(), MAGIC, ZLIB_COMP, flags, *name_map)
                      + mod_map.tobytes() + mod_ver.tobytes())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return LogInfo(str(path), nprocs, len(files), records, segments, path.stat().st_size)


def _path_bytes(p: str) -> bytes:
    raw = p.encode()
    if b"\0" in raw or len(raw) >= 4096:
        raise ValueError(f"bad file path {p!r}")
    return raw + b"\0"


def _job_region(nprocs: int, exe: str, start: float, end: float, metadata: Mapping[str, str], uid: int,
                jobid: int, mounts: Sequence[tuple[str, str]]) -> bytes:
    """struct darshan_job, then the exe and ``\\n<type>\\t<mount point>`` lines (last mount first)."""
    md = "".join(f"{k}={v}\n" for k, v in metadata.items()).encode()
    if any("=" in k or "\n" in k + v for k, v in metadata.items()) or len(md) >= 1024:
        raise ValueError("metadata: key=value pairs without newlines ('=' not in keys), under 1024 bytes")
    if not mounts or any(not m or not t or len(f"{m} {t}".split()) != 2 for m, t in mounts):
        raise ValueError("mounts: at least one (mount point, fs type), neither empty nor with spaces")
    if "\n" in exe:
        raise ValueError("exe: one line")
    (s_sec, s_nsec), (e_sec, e_nsec) = _sec_nsec(start), _sec_nsec(end)
    head = struct.pack("<7q1024s", uid, s_sec, s_nsec, e_sec, e_nsec, nprocs, jobid, md)
    tail = exe.encode() + "".join(f"\n{t}\t{m}" for m, t in reversed(mounts)).encode() + b"\0"
    if len(head) + len(tail) > JOB_RECORD_SIZE:
        raise ValueError(f"exe and mounts take {len(tail)} bytes, more than {JOB_RECORD_SIZE - len(head)}")
    return head + tail


def _sec_nsec(t: float) -> tuple[int, int]:
    """Unix seconds -> (seconds, nanoseconds), rounding the fraction only (t * 1e9 would lose it)."""
    sec = math.floor(t)
    return divmod(sec * 10**9 + round((t - sec) * 1e9), 10**9)


def _deflate(out, data: bytes | np.ndarray, level: int) -> int:
    """Write ``data`` as one zlib stream; the compressed length."""
    buf = data.reshape(-1).view(np.uint8) if isinstance(data, np.ndarray) else memoryview(data)
    comp = zlib.compressobj(level)
    n = 0
    for i in range(0, len(buf), _CHUNK):
        n += out.write(comp.compress(buf[i:i + _CHUNK]))
    return n + out.write(comp.flush())


def _pack_counters(module: str, table: Counters, ids: np.ndarray, nfiles: int) -> np.ndarray:
    """struct darshan_{mpiio,posix,stdio}_file records: base record, int64 counters, double fcounters."""
    names, fnames = _NAMES[module]
    rec = np.zeros(len(table), [("id", "<u8"), ("rank", "<i8"), ("counters", "<i8", (len(names),)),
                                ("fcounters", "<f8", (len(fnames),))])
    _check_index(table.file, nfiles, "file")
    rec["id"], rec["rank"] = ids[table.file], table.rank
    for column, known, given in (("counters", names, table.counters), ("fcounters", fnames, table.fcounters)):
        index = {n: i for i, n in enumerate(known)}
        for name, value in given.items():
            if name not in index:
                raise KeyError(f"{name!r} is not a {module} {column[:-1]} (known: {', '.join(known)})")
            rec[column][:, index[name]] = value
    return rec


def _check_index(values: np.ndarray, n: int, what: str) -> None:
    if len(values) and (values.min() < 0 or values.max() >= n):
        raise ValueError(f"{what} out of range [0, {n})")


def _pack_dxt(segs: Segments, ids: np.ndarray, hosts: np.ndarray, nprocs: int) -> tuple[np.ndarray, int]:
    """DXT records (one per file and rank, rank-major as the runtime writes them), each a
    struct dxt_file_record followed by its write then read segment_info; as 64-bit words."""
    _check_index(segs.file, len(ids), "file")
    _check_index(segs.rank, nprocs, "rank")
    n = len(segs)
    order = np.lexsort((segs.is_read, segs.file, segs.rank))
    file, rank = segs.file[order], segs.rank[order]
    new = np.ones(n, bool)
    new[1:] = (file[1:] != file[:-1]) | (rank[1:] != rank[:-1])
    first = np.flatnonzero(new)
    count = np.diff(np.append(first, n))
    if 104 + 32 * count.max() > MAX_RECORD_BYTES:
        raise ValueError("a DXT record of more than 2 GiB (67 M segments) cannot be read back")
    head = np.zeros(len(first), DXT_RECORD)
    head["id"], head["rank"], head["hostname"] = ids[file[first]], rank[first], hosts[rank[first]]
    head["read_count"] = np.add.reduceat(segs.is_read[order].astype(np.int64), first)
    head["write_count"] = count - head["read_count"]
    body = np.empty(n, DXT_SEGMENT)
    for src, dst in zip(("offset", "length", "start", "end"), DXT_SEGMENT.names):
        body[dst] = getattr(segs, src)[order]
    hw, sw = DXT_RECORD.itemsize // 8, DXT_SEGMENT.itemsize // 8
    words = np.empty(len(first) * hw + n * sw, "<u8")
    at = np.arange(len(first)) * hw + (np.cumsum(count) - count) * sw  # where each record starts
    head_words = (at[:, None] + np.arange(hw)).ravel()
    is_head = np.zeros(len(words), bool)
    is_head[head_words] = True
    words[head_words] = head.view("<u8")
    words[~is_head] = body.view("<u8")
    return words, len(first)


# ---------------------------------------------------------------------------- synthetic logs

@dataclass
class LogContent:
    """The keyword arguments of :func:`write_log` (``write_log(path, **vars(content))``)."""

    nprocs: int
    exe: str
    start_time: float
    end_time: float
    files: list[str]
    mpiio: Counters
    dxt_mpiio: Segments
    dxt_posix: Segments
    posix: Counters
    metadata: dict[str, str]
    mounts: list[tuple[str, str]]
    hostnames: list[str]
    uid: int = 1000
    jobid: int = 1


def synthetic_trace(*, ranks: int, files: int = 1, accesses: int = 8, size: int = 1 << 20,
                    collective: bool = True, reads: bool = True, pattern: str = "strided",
                    file_per_process: bool = False, gap: float = 0.01, bandwidth: float = 1 << 30,
                    ranks_per_node: int = 16, cb_nodes: int | None = None, cb_buffer_size: int = 16 << 20,
                    shared_records: bool = True, seed: int = 0, start_time: float = 1_700_000_000.0,
                    directory: str = "/scratch/callid") -> LogContent:
    """An IOR-like run: each rank writes ``accesses`` blocks of ``size`` bytes to each of ``files``
    files, then (``reads``) reads them back.

    ``pattern`` "strided": block k of rank r at ``(k * ranks + r) * size`` (IOR segments);
    "contiguous": at ``(r * accesses + k) * size``; with ``file_per_process`` at ``k * size`` of
    the rank's own file.  ``gap`` (s) separates a rank's calls; a call moves ``bandwidth`` bytes/s
    per rank; jitter comes from ``np.random.default_rng(seed)``.  Collective calls on a shared
    file end together; their POSIX I/O is ROMIO's two-phase: ``cb_nodes`` aggregators (default one
    per node of ``ranks_per_node``) each own an even file domain and write it ``cb_buffer_size`` at
    a time.  ``shared_records``: one MPI-IO / POSIX record with rank -1 per shared file (darshan's
    default reduction) instead of one per rank.
    """
    if pattern not in ("strided", "contiguous"):
        raise ValueError(f"pattern {pattern!r}: strided or contiguous")
    if min(ranks, files, accesses, size, ranks_per_node, cb_buffer_size) < 1:
        raise ValueError("ranks, files, accesses, size, ranks_per_node and cb_buffer_size must be positive")
    rng = np.random.default_rng(seed)
    shared = not file_per_process
    n_agg = min(ranks, cb_nodes or -(-ranks // ranks_per_node))
    agg_ranks = np.arange(n_agg) * ranks // n_agg
    all_ranks = np.arange(ranks)
    k = np.arange(accesses)
    if not shared:
        offsets = np.broadcast_to(k * size, (ranks, accesses))
    elif pattern == "strided":
        offsets = (k[None, :] * ranks + all_ranks[:, None]) * size
    else:
        offsets = (all_ranks[:, None] * accesses + k[None, :]) * size
    speed = rng.lognormal(0.0, 0.1, ranks)  # per-rank: some ranks are slower
    t = 0.1 + rng.uniform(0, 0.02, ranks)  # after MPI_Init
    mpi_parts: list[Segments] = []
    posix_parts: list[Segments] = []
    meta = np.zeros((4, files, ranks))  # open start/end, close start/end, per phase and rank
    for f in range(files):
        fidx = f * ranks + all_ranks if file_per_process else np.full(ranks, f)
        meta[0, f] = t + rng.uniform(0, 1e-4, ranks)
        t = meta[1, f] = _meta_end(meta[0, f], shared, rng)
        for op_read in (False, True)[:1 + reads]:
            start, end = np.empty((ranks, accesses)), np.empty((ranks, accesses))
            for i in range(accesses):
                start[:, i] = t + gap * rng.uniform(0.5, 1.5, ranks)
                if collective and shared:
                    call = ranks * size / n_agg / bandwidth * rng.lognormal(0.0, 0.1) + 2e-4  # + exchange
                    end[:, i] = start[:, i].max() + call + rng.uniform(0, 5e-5, ranks)
                else:
                    end[:, i] = start[:, i] + size / bandwidth * speed * rng.lognormal(0.0, 0.1, ranks)
                t = end[:, i]
            mpi_parts.append(Segments(fidx[:, None], all_ranks[:, None], offsets, size, start, end, op_read))
            if collective and shared:
                posix_parts += [_two_phase(f, offsets[:, i], size, start[:, i].max(), end[:, i].min(),
                                           agg_ranks, cb_buffer_size, op_read) for i in range(accesses)]
            else:  # independent: one system call per MPI-IO call, inside it
                lag = np.minimum(2e-5, (end - start) * 0.1)
                posix_parts.append(Segments(fidx[:, None], all_ranks[:, None], offsets, size, start + lag,
                                            end - lag, op_read))
        meta[2, f] = t + rng.uniform(1e-4, 1e-3, ranks)
        t = meta[3, f] = _meta_end(meta[2, f], shared, rng)
    mpi, psx = Segments.concat(mpi_parts), Segments.concat(posix_parts)
    names = [f"{directory}/file{f}.{r:05d}" for f in range(files) for r in range(ranks)] if file_per_process \
        else [f"{directory}/file{f}" for f in range(files)]
    mode = 9 if reads else 5  # MPI_MODE_CREATE | MPI_MODE_RDWR (or WRONLY), MPICH's values
    mpiio = counters_of("MPI-IO", mpi, meta, file_per_process, shared_records, ranks,
                      {"MPIIO_COLL_OPENS" if shared else "MPIIO_INDEP_OPENS": 1, "MPIIO_MODE": mode},
                      "COLL" if collective else "INDEP")
    posix = counters_of("POSIX", psx, meta, file_per_process, shared_records, ranks,
                      {"POSIX_OPENS": 1, "POSIX_MODE": 0o644}, "")
    blocks = (accesses, 1) if pattern == "strided" else (1, accesses)
    exe = (f"/usr/local/bin/ior -a MPIIO{' -c' if collective else ''}{' -F' if file_per_process else ''} -w"
           f"{' -r' if reads else ''} -s {blocks[0]} -b {size * blocks[1]} -t {size} -o {directory}/file")
    metadata = {"lib_ver": "3.5.0", "h": "romio_no_indep_rw=true;cb_nodes=4",  # what darshan-runtime puts
                "synthetic": f"ranks={ranks} files={files} accesses={accesses} size={size} pattern={pattern} "
                             f"collective={int(collective)} reads={int(reads)} fpp={int(file_per_process)} "
                             f"cb_nodes={n_agg} cb_buffer_size={cb_buffer_size} seed={seed}"}
    top = "/" + directory.strip("/").split("/")[0]
    return LogContent(
        nprocs=ranks, exe=exe, start_time=start_time, end_time=start_time + float(t.max()) + 0.2,
        files=names, mpiio=mpiio, dxt_mpiio=mpi, dxt_posix=psx, posix=posix, metadata=metadata,
        mounts=[("/", "rootfs"), (top, "lustre")] if top != "/" else [("/", "rootfs")],
        hostnames=[f"nid{r // ranks_per_node:05d}" for r in range(ranks)])


def synthetic_dxt_log(path: str | os.PathLike, *, compress_level: int = 1, **options) -> LogInfo:
    """Write :func:`synthetic_trace` (``options``) as a Darshan log at ``path``."""
    return write_log(path, **vars(synthetic_trace(**options)), compress_level=compress_level)


def _meta_end(start: np.ndarray, shared: bool, rng: np.random.Generator) -> np.ndarray:
    """End of an open or close begun at ``start``: collective on a shared file, else per rank."""
    if shared:
        return start.max() + 1e-3 * rng.lognormal(0.0, 0.3) + rng.uniform(0, 5e-5, len(start))
    return start + 1e-3 * rng.lognormal(0.0, 0.3, len(start))


def _two_phase(file: int, offsets: np.ndarray, size: int, t0: float, t1: float, agg_ranks: np.ndarray,
               cb: int, is_read: bool) -> Segments:
    """The system calls of one collective call (every rank's block of ``size`` at ``offsets``)."""
    lo_sorted = np.sort(offsets)
    gaps = np.flatnonzero(lo_sorted[1:] != lo_sorted[:-1] + size) + 1
    run_lo, run_hi = lo_sorted[np.r_[0, gaps]], lo_sorted[np.r_[gaps - 1, len(lo_sorted) - 1]] + size
    n_agg = len(agg_ranks)
    bounds = run_lo[0] + np.arange(n_agg + 1) * (run_hi[-1] - run_lo[0]) // n_agg  # even file domains
    chunks = -(-np.diff(bounds) // cb)
    within = np.arange(chunks.sum()) - np.repeat(np.cumsum(chunks) - chunks, chunks)
    cuts = np.unique(np.concatenate([run_lo, run_hi, bounds, np.repeat(bounds[:-1], chunks) + within * cb]))
    lo, hi = cuts[:-1], cuts[1:]
    keep = lo < run_hi[np.searchsorted(run_lo, lo, "right") - 1]  # pieces with data (not holes)
    lo, hi = lo[keep], hi[keep]
    agg = np.minimum(np.searchsorted(bounds, lo, "right") - 1, n_agg - 1)
    per = np.bincount(agg, minlength=n_agg)
    j = np.arange(len(lo)) - np.repeat(np.cumsum(per) - per, per)  # index within its aggregator
    slot = 0.9 * (t1 - t0) / per[agg]
    start = t0 + 0.1 * (t1 - t0) + j * slot
    return Segments(file, agg_ranks[agg], lo, hi - lo, start, start + 0.95 * slot, is_read)


def counters_of(module: str, segs: Segments, meta: np.ndarray, fpp: bool, shared_records: bool, ranks: int,
              fixed: dict[str, int], kind: Kinds, alignment: int | None = None) -> Counters:
    """Counters of every opened (file, rank) from its segments; reduced to rank -1 per shared file."""
    files = meta.shape[1]
    p = "MPIIO_" if module == "MPI-IO" else "POSIX_"
    phase = segs.file // ranks if fpp else segs.file
    per_rank = _segment_counters(p, kind, segs, phase * ranks + segs.rank, files * ranks, alignment)
    o_s, o_e, c_s, c_e = (m.ravel() for m in meta)
    per_rank.update({f"{p}F_OPEN_START_TIMESTAMP": o_s, f"{p}F_OPEN_END_TIMESTAMP": o_e,
                     f"{p}F_CLOSE_START_TIMESTAMP": c_s, f"{p}F_CLOSE_END_TIMESTAMP": c_e,
                     f"{p}F_META_TIME": (o_e - o_s) + (c_e - c_s)})
    rank = np.tile(np.arange(ranks), files)
    if fpp or not shared_records:
        file = np.arange(files * ranks) if fpp else np.repeat(np.arange(files), ranks)
        ints = {k: v for k, v in per_rank.items() if "_F_" not in k}
        floats = {k: v for k, v in per_rank.items() if "_F_" in k}
        return Counters(file, rank, {**ints, **fixed}, floats)
    reduced = _segment_counters(p, kind, segs, segs.file, files, alignment)
    grid = {k: v.reshape(files, ranks) for k, v in per_rank.items()}
    for which, reduce in (("START", np.min), ("END", np.max)):
        for op in ("OPEN", "CLOSE"):
            reduced[f"{p}F_{op}_{which}_TIMESTAMP"] = reduce(grid[f"{p}F_{op}_{which}_TIMESTAMP"], axis=1)
    reduced[f"{p}F_META_TIME"] = grid[f"{p}F_META_TIME"].sum(axis=1)
    for name in ("RW_SWITCHES", *(f"{a}_{b}" for a in ("SEQ", "CONSEC") for b in ("READS", "WRITES"))):
        if f"{p}{name}" in grid:  # (per rank, not across ranks)
            reduced[f"{p}{name}"] = grid[f"{p}{name}"].sum(axis=1)
    secs = grid[f"{p}F_READ_TIME"] + grid[f"{p}F_WRITE_TIME"] + grid[f"{p}F_META_TIME"]
    moved = grid[f"{p}BYTES_READ"] + grid[f"{p}BYTES_WRITTEN"]
    fast, slow = secs.argmin(axis=1), secs.argmax(axis=1)
    at = np.arange(files)
    reduced.update({f"{p}FASTEST_RANK": fast, f"{p}FASTEST_RANK_BYTES": moved[at, fast],
                    f"{p}SLOWEST_RANK": slow, f"{p}SLOWEST_RANK_BYTES": moved[at, slow],
                    f"{p}F_FASTEST_RANK_TIME": secs[at, fast], f"{p}F_SLOWEST_RANK_TIME": secs[at, slow],
                    f"{p}F_VARIANCE_RANK_TIME": secs.var(axis=1),
                    f"{p}F_VARIANCE_RANK_BYTES": moved.var(axis=1)})
    ints = {k: v for k, v in reduced.items() if "_F_" not in k}
    floats = {k: v for k, v in reduced.items() if "_F_" in k}
    fixed = {k: v * ranks if k.endswith("OPENS") else v for k, v in fixed.items()}
    return Counters(np.arange(files), -1, {**ints, **fixed}, floats)


def _segment_counters(p: str, kind: Kinds, segs: Segments, key: np.ndarray, n: int,
                      alignment: int | None = None) -> dict[str, np.ndarray]:
    """Per-key counters of ``segs``: operation counts (of each kind), bytes, size histograms, times, common
    sizes; with an ``alignment``, the operations whose offset is not a multiple of it."""
    out: dict[str, np.ndarray] = {}
    agg = "AGG_" if p == "MPIIO_" else ""
    dur = segs.end - segs.start
    kinds = kind if isinstance(kind, dict) else {kind: np.ones(len(segs), np.bool_)}
    for op_read, op, verb, counted in ((False, "WRITE", "WRITTEN", "WRITES"),
                                       (True, "READ", "READ", "READS")):
        sel = segs.is_read == op_read
        k, length, d = key[sel], segs.length[sel], dur[sel]
        for name, mask in kinds.items():
            counts = np.bincount(key[sel & mask], minlength=n)
            out[f"{p}{name}_{counted}" if name else f"{p}{counted}"] = counts
        out[f"{p}BYTES_{verb}"] = np.bincount(k, length, minlength=n).astype(np.int64)
        if p == "POSIX_":
            max_byte = np.full(n, -1, np.int64)
            np.maximum.at(max_byte, k, segs.offset[sel] + length - 1)
            out[f"{p}MAX_BYTE_{verb}"] = max_byte
        hist = np.bincount(k * 10 + np.searchsorted(_BUCKET_LIMITS, length, "right"), minlength=n * 10)
        for b, name in enumerate(_BUCKETS):
            out[f"{p}SIZE_{op}_{agg}{name}"] = hist[b::10]
        first, final, slowest = np.full(n, 0.0), np.full(n, 0.0), np.zeros(n)
        if len(k):
            first[:] = np.inf
            np.minimum.at(first, k, segs.start[sel])
            np.maximum.at(final, k, segs.end[sel])
            np.maximum.at(slowest, k, d)
            first[np.isinf(first)] = 0.0
        out[f"{p}F_{op}_START_TIMESTAMP"], out[f"{p}F_{op}_END_TIMESTAMP"] = first, final
        out[f"{p}F_{op}_TIME"] = np.bincount(k, d, minlength=n)
        out[f"{p}F_MAX_{op}_TIME"] = slowest
        hit = d == slowest[k]  # the slowest operation(s) of each key
        size_of_slowest = np.zeros(n, np.int64)
        size_of_slowest[k[hit]] = length[hit]
        out[f"{p}MAX_{op}_TIME_SIZE"] = size_of_slowest
    if p == "POSIX_":  # per key and direction in time order: SEQ past the last byte before, CONSEC just after
        for op_read, counted in ((False, "WRITES"), (True, "READS")):
            at = np.flatnonzero(segs.is_read == op_read)
            at = at[np.lexsort((segs.start[at], key[at]))]
            k, off = key[at], segs.offset[at]
            last = np.r_[0, off[:-1] + segs.length[at][:-1] - 1]
            last[np.r_[True, k[1:] != k[:-1]]] = 0  # (darshan starts each record at byte 0)
            out[f"{p}SEQ_{counted}"] = np.bincount(k, off > last, minlength=n).astype(np.int64)
            out[f"{p}CONSEC_{counted}"] = np.bincount(k, off == last + 1, minlength=n).astype(np.int64)
    if alignment:
        off_grid = (segs.offset % alignment != 0).astype(np.int64)
        out[f"{p}FILE_NOT_ALIGNED"] = np.bincount(key, off_grid, minlength=n).astype(np.int64)
        out[f"{p}FILE_ALIGNMENT"] = np.full(n, alignment, np.int64)
    by_time = np.lexsort((segs.start, key))
    k_t, read_t = key[by_time], segs.is_read[by_time]
    switch = (k_t[1:] == k_t[:-1]) & (read_t[1:] != read_t[:-1])
    out[f"{p}RW_SWITCHES"] = np.bincount(k_t[1:][switch], minlength=n)
    order = np.lexsort((segs.length, key))  # (key, size) pairs and how often each occurs
    k_s, l_s = key[order], segs.length[order]
    first = np.flatnonzero(np.r_[True, (k_s[1:] != k_s[:-1]) | (l_s[1:] != l_s[:-1])])
    pk, size, count = k_s[first], l_s[first], np.diff(np.r_[first, len(k_s)])
    order = np.lexsort((size, -count, pk))  # per key: most common first, then the smaller size
    pk, size, count = pk[order], size[order], count[order]
    rank_in_key = np.arange(len(pk)) - np.searchsorted(pk, pk)
    for i in range(4):
        at = rank_in_key == i
        out[f"{p}ACCESS{i + 1}_ACCESS"] = np.bincount(pk[at], size[at], minlength=n).astype(np.int64)
        out[f"{p}ACCESS{i + 1}_COUNT"] = np.bincount(pk[at], count[at], minlength=n).astype(np.int64)
    return out


# ---------------------------------------------------------------------------- command line

def main(argv: list[str] | None = None) -> int:
    """``python -m bench.darshan_log OUT --ranks N ...``: write a synthetic log, say what it holds."""
    ap = argparse.ArgumentParser(prog="python -m bench.darshan_log", description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the .darshan file to write")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--files", type=int, default=1, help="shared files (per rank with --file-per-process)")
    ap.add_argument("--accesses", type=int, default=8, help="blocks each rank writes to each file")
    ap.add_argument("--size", type=parse_size, default=1 << 20, help="block size (default 1MiB)")
    ap.add_argument("--pattern", choices=("strided", "contiguous"), default="strided")
    ap.add_argument("--independent", action="store_true", help="independent, not collective, MPI-IO calls")
    ap.add_argument("--no-reads", action="store_true", help="write only")
    ap.add_argument("--file-per-process", action="store_true")
    ap.add_argument("--gap", type=parse_duration, default=1e7, help="time between a rank's calls (10ms)")
    ap.add_argument("--ranks-per-node", type=int, default=16)
    ap.add_argument("--cb-nodes", type=int, default=None, help="aggregators (default: one per node)")
    ap.add_argument("--cb-buffer-size", type=parse_size, default=16 << 20)
    ap.add_argument("--per-rank-records", action="store_true", help="no rank -1 records for shared files")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--level", type=int, default=1, help="zlib level (1: fast; darshan-runtime uses 6)")
    args = ap.parse_args(argv)
    began = time.perf_counter()
    info = synthetic_dxt_log(
        args.out, ranks=args.ranks, files=args.files, accesses=args.accesses, size=args.size,
        pattern=args.pattern, collective=not args.independent, reads=not args.no_reads,
        file_per_process=args.file_per_process, gap=args.gap / 1e9, ranks_per_node=args.ranks_per_node,
        cb_nodes=args.cb_nodes, cb_buffer_size=args.cb_buffer_size, shared_records=not args.per_rank_records,
        seed=args.seed, compress_level=args.level)
    took = time.perf_counter() - began
    print(f"wrote {info.path}: {info.nprocs} ranks, {info.files} file{'s' * (info.files != 1)}, "
          f"{info.size:,} bytes on disk ({info.size / 2**20:.2f} MiB) in {took:.2f} s")
    for name in MODULES:
        if name in info.records:
            segs = f", {info.segments[name]:,} segments" if name in info.segments else ""
            print(f"  {name:9} {info.records[name]:,} records{segs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
