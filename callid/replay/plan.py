"""Turn an access table into a replay schedule: CallIDs, MPI functions and collective calls in order.

Every access becomes one call of its source rank.  The collective calls of all files are numbered
in the order they began (``coll_seq``); they split each rank's stream into epochs: epoch ``e`` is the
independent calls a rank makes after its collective call ``e - 1`` (after none, for 0) and before
its next one.  A replayer runs epoch ``e`` of its ranks, then collective call ``e`` with the other
replayers, and so on.

Before that (epoch -1) each file is opened once, by the lowest rank that accesses it (the logs
replayed record no open calls), and a file the source run reads before it writes it is first
written up to the end of its last read, in pieces of ``PREFILL_PIECE`` bytes, by that rank (so the
reads find data).  These calls are marked: origin 'replay', inferred 'open' or 'prefill'.
"""

from __future__ import annotations

import fnmatch
import functools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from callid.replay.accesses import ACCESS, READ, WRITE
from callid_core.config import DEFAULT_CB_BUFFER_SIZE
from callid_core.errors import BadValue, InputError
from callid_core.evidence import REPLAY_ORIGIN
from callid_core.ids import Layout
from callid_core.schema import Column, Table
from callid_core.units import RankSet

__all__ = ["OPEN", "OPTIONS_KEY", "SCHEDULE", "SETUP", "Plan", "make_plan", "select"]

OPEN = "open"
PREFILL = "prefill"
PREFILL_PIECE = DEFAULT_CB_BUFFER_SIZE  # bytes per prefill write
SETUP = -1  # the epoch of the opens and prefill writes
#: Parquet metadata key of a schedule file: the replay's options, JSON (timing, time_scale, hints,
#: ranks_per_host)
OPTIONS_KEY = b"callid.replay"
FUNCS = {(WRITE, False): "MPI_File_write_at", (WRITE, True): "MPI_File_write_at_all",
         (READ, False): "MPI_File_read_at", (READ, True): "MPI_File_read_at_all",
         (OPEN, False): "MPI_File_open"}

SCHEDULE = Table("schedule", "one call to replay, in each rank's order", [
    *(c for c in ACCESS.columns if c.name != "func"),
    Column("path", pa.string(), "the file on the simulated file system: the mount, then the name (a name "
           "under the mount stays as it is)", nullable=False),
    Column("func", pa.string(), "the MPI function: the source's, else MPI_File_write_at/read_at (_all when "
           "collective)", nullable=False),
    Column("callid", pa.uint64(), "the call's CallID (its source rank, its number on that rank)",
           nullable=False),
    Column("epoch", pa.int64(), "the collective calls the rank made before this call", nullable=False),
    Column("coll_seq", pa.int64(), "a collective call's number among all collective calls (its epoch); "
           "null: independent"),
])


@dataclass
class Plan:
    calls: pa.Table  # SCHEDULE, sorted by rank then order
    collectives: int  # collective calls (epochs - 1)
    ranks: int
    files: int


def select(accesses: pa.Table, ranks: RankSet | None = None, files: list[str] | None = None,
           window: tuple[float, float] | None = None) -> pa.Table:
    """The accesses of ``ranks``, of files matching one of the ``files`` patterns (fnmatch), starting
    in ``window`` (ns)."""
    mask = pa.array(np.ones(accesses.num_rows, bool))
    if ranks is not None:
        rank = accesses["rank"]
        inside = (pc.and_(pc.greater_equal(rank, lo), pc.less_equal(rank, hi)) for lo, hi in ranks.ranges)
        mask = pc.and_(mask, functools.reduce(pc.or_, inside))
    if files:
        names = pc.unique(accesses["file"]).to_pylist()
        keep = [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in files)]
        mask = pc.and_(mask, pc.is_in(accesses["file"], pa.array(keep, pa.string())))
    if window is not None:
        lo, hi = window
        mask = pc.and_(mask, pc.greater_equal(accesses["t_start"], int(lo)))
        if hi != float("inf"):
            mask = pc.and_(mask, pc.less(accesses["t_start"], int(hi)))
    return accesses.filter(mask)


def make_plan(accesses: pa.Table, layout: Layout, mount: str, prefill: bool = True) -> Plan:
    """The schedule of ``accesses`` (see the module's doc); raise :class:`InputError` when the
    ranks' collective calls cannot be put in one order."""
    if accesses.num_rows == 0:
        raise InputError("nothing to replay: no access is left after --ranks, --files and --window")
    if int(pc.max(accesses["rank"]).as_py()) > layout.max_rank:
        raise BadValue(f"rank {pc.max(accesses['rank']).as_py()} does not fit CallID layout {layout} "
                       f"(max rank {layout.max_rank}): choose one with more rank bits")
    acc = _with_setup(accesses, prefill)
    order = pc.sort_indices(acc, [("rank", "ascending"), ("t_start", "ascending")])
    acc = acc.take(order)  # (stable: an open stays before the accesses of its time)
    rank = acc["rank"].to_numpy()
    n = len(rank)
    first = np.r_[True, rank[1:] != rank[:-1]]
    start_of_rank = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    counter = np.arange(n) - start_of_rank + 1
    if counter.max() > layout.max_counter:
        raise BadValue(f"a rank makes {counter.max()} calls, more than CallID layout {layout} counts "
                       f"({layout.max_counter}): choose one with fewer rank bits")
    callid = (rank.astype(np.uint64) << np.uint64(layout.counter_bits)) | counter.astype(np.uint64)
    coll_seq = _number_collectives(acc)
    epoch = _epochs(rank, coll_seq)
    epoch[pc.equal(acc["origin"], REPLAY_ORIGIN).to_numpy(zero_copy_only=False)] = SETUP
    io = acc["io"].to_numpy(zero_copy_only=False)
    collective = coll_seq >= 0
    func = pc.coalesce(acc["func"], pa.array(_funcs(io, collective), pa.string()))
    base = mount.rstrip("/")
    path = pc.if_else(pc.starts_with(acc["file"], base + "/"), acc["file"],  # (already under the mount)
                      pc.binary_join_element_wise(base, pc.utf8_ltrim(acc["file"], "/"), "/"))
    calls = acc.drop_columns(["func"]).append_column("path", path).append_column("func", func)
    calls = calls.append_column("callid", pa.array(callid, pa.uint64()))
    calls = calls.append_column("epoch", pa.array(epoch, pa.int64()))
    calls = calls.append_column("coll_seq", pa.array(np.where(collective, coll_seq, 0), pa.int64(),
                                                     mask=~collective))
    return Plan(calls.cast(SCHEDULE.schema), int(coll_seq.max()) + 1, len(np.unique(rank)),
                len(pc.unique(acc["file"])))


def stored_bytes(calls: pa.Table, block: int) -> int:
    """The bytes the writes of a schedule (its prefill writes too) leave on a disk of ``block``-byte
    blocks: per file, the union of the ranges they write, in whole blocks (a range written twice
    counts once, a byte a whole block)."""
    writes = calls.filter(pc.equal(calls["io"], WRITE))
    counts = pc.list_value_length(writes["region_offsets"]).to_numpy(zero_copy_only=False)
    one = counts == 0  # (one range: offset, length)
    file = pc.dictionary_encode(writes["path"]).combine_chunks().indices.to_numpy()
    file = np.concatenate([file[one], np.repeat(file, counts)])
    start = np.concatenate([writes["offset"].to_numpy()[one],
                            pc.list_flatten(writes["region_offsets"]).to_numpy()])
    end = start + np.concatenate([writes["length"].to_numpy()[one],
                                  pc.list_flatten(writes["region_lengths"]).to_numpy()])
    used = end > start
    file, lo, hi = file[used], start[used] // block, -(-end[used] // block)
    if not len(file):
        return 0
    order = np.lexsort((lo, file))
    file, lo, hi = file[order], lo[order], hi[order]
    blocks = 0
    for f_lo, f_hi in zip(*(np.split(a, np.flatnonzero(np.diff(file)) + 1) for a in (lo, hi))):
        reached = np.maximum.accumulate(f_hi)  # the end of the union of the ranges so far
        blocks += int(np.maximum(f_hi - np.maximum(f_lo, np.r_[f_lo[0], reached[:-1]]), 0).sum())
    return blocks * block


def _with_setup(acc: pa.Table, prefill: bool) -> pa.Table:
    """``acc`` and, per file, an open by its lowest rank just before the file's first access, then
    (``prefill``) the writes that give a file read before it is written its data."""
    firsts = acc.group_by("file").aggregate([("rank", "min"), ("t_start", "min")])
    k = firsts.num_rows
    at = pc.subtract(firsts["t_start_min"], 1)
    setup = [_calls(firsts["rank_min"], firsts["file"], OPEN, np.zeros(k, np.int64), np.zeros(k, np.int64),
                    at)]
    if prefill:
        setup.append(_prefill(acc, firsts))
    return pa.concat_tables([*setup, acc.cast(ACCESS.schema)])


def _prefill(acc: pa.Table, firsts: pa.Table) -> pa.Table:
    """Writes of ``[0, end of the last read)`` of each file whose first access is a read."""
    ends = pc.add(acc["offset"], acc["length"])
    writes = acc.select(["file", "t_start"]).filter(pc.equal(acc["io"], WRITE))
    first_write = writes.group_by("file").aggregate([("t_start", "min")])
    is_read = pc.equal(acc["io"], READ)
    reads = acc.select(["file", "t_start"]).filter(is_read).append_column("end", ends.filter(is_read))
    reads = reads.join(first_write.rename_columns(["file", "first_write"]), "file")
    before = pc.or_kleene(pc.is_null(reads["first_write"]), pc.less(reads["t_start"], reads["first_write"]))
    files = pc.unique(reads.filter(before)["file"])
    need = reads.filter(pc.is_in(reads["file"], files)).group_by("file").aggregate([("end", "max")])
    need = need.join(firsts, "file")
    end = need["end_max"].to_numpy()
    pieces = -(-end // PREFILL_PIECE)
    row = np.repeat(np.arange(need.num_rows), pieces)
    first = np.repeat(np.cumsum(pieces) - pieces, pieces)
    offset = (np.arange(len(row)) - first) * PREFILL_PIECE
    length = np.minimum(PREFILL_PIECE, end[row] - offset)
    idx = pa.array(row)
    return _calls(need["rank_min"].take(idx), need["file"].take(idx), WRITE, offset, length,
                  pc.subtract(need["t_start_min"], 1).take(idx), PREFILL)


def _calls(rank, file, io: str, offset: np.ndarray, length: np.ndarray, at, what: str = OPEN) -> pa.Table:
    """Calls the replay adds (origin 'replay', inferred ``what``)."""
    k = len(offset)
    return ACCESS.arrow(k, {
        "rank": rank, "file": file, "io": pa.repeat(pa.scalar(io), k), "offset": pa.array(offset, pa.int64()),
        "length": pa.array(length, pa.int64()), "t_start": at, "t_end": at,
        "origin": pa.repeat(pa.scalar(REPLAY_ORIGIN), k), "inferred": pa.repeat(pa.scalar(what), k)})


def _number_collectives(acc: pa.Table) -> np.ndarray:
    """Each row's collective call number (-1: independent): calls (file, io, coll) in order of their
    first start."""
    has = ~pc.is_null(acc["coll"]).to_numpy(zero_copy_only=False)
    out = np.full(acc.num_rows, -1, np.int64)
    if not has.any():
        return out
    part = acc.filter(pa.array(has)).select(["file", "io", "coll", "t_start"])
    calls = part.group_by(["file", "io", "coll"]).aggregate([("t_start", "min")])
    calls = calls.take(pc.sort_indices(calls, [("t_start_min", "ascending"), ("file", "ascending"),
                                               ("io", "ascending"), ("coll", "ascending")]))
    calls = calls.append_column("seq", pa.array(np.arange(calls.num_rows, dtype=np.int64)))
    rows = np.flatnonzero(has)
    part = part.append_column("row", pa.array(rows))
    joined = part.join(calls.select(["file", "io", "coll", "seq"]), ["file", "io", "coll"])
    out[joined["row"].to_numpy()] = joined["seq"].to_numpy()
    rank = acc["rank"].to_numpy()[rows]
    seq = out[rows]
    same = rank[1:] == rank[:-1]
    bad = np.flatnonzero(same & (seq[1:] <= seq[:-1]))
    if len(bad):
        r = int(rank[bad[0]])
        raise InputError(f"rank {r} makes its collective calls in another order than the other ranks "
                         f"(file {part['file'][int(bad[0]) + 1]}): they cannot be replayed as collectives")
    return out


def _epochs(rank: np.ndarray, coll_seq: np.ndarray) -> np.ndarray:
    """Per row: the number of the rank's last collective call before it plus one (0: none); a
    collective row is in its own call's epoch."""
    n = len(rank)
    idx = np.where(coll_seq >= 0, np.arange(n), -1)
    last = np.maximum.accumulate(np.r_[-1, idx[:-1]]) if n else idx  # the last collective row before
    valid = (last >= 0) & (rank[np.maximum(last, 0)] == rank)
    before = np.where(valid, coll_seq[np.maximum(last, 0)] + 1, 0)
    return np.where(coll_seq >= 0, coll_seq, before)


def _funcs(io: np.ndarray, collective: np.ndarray) -> np.ndarray:
    out = np.empty(len(io), dtype=object)
    for (kind, coll), name in FUNCS.items():
        out[(io == kind) & (collective == coll)] = name
    return out

