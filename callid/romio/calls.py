"""On whose behalf a thread's file-system operation is: what the FUSE client reads of the
interposition library's slots and records (``callid.romio.records``).

A thread in an MPI-IO call has a slot naming its CallID and its record; the record says the call's
function, whether it is collective and its file ranges.  An aggregator's operation in a collective
call serves the calls of that collective (the records with its ``coll_seq``, on every rank) whose
file ranges it covers: :meth:`Calls.context` gives their CallIDs and whose bytes are where, as the
simulated client's :class:`CallContext` carries them.
"""

from __future__ import annotations

import mmap
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from callid.mpiio.call import CallContext
from callid.romio import records as R

__all__ = ["NOBODY", "Calls", "Caller", "same_file"]

_COLLECTIVE = 1 << R.FLAGS.index("collective")
_HAS_COLL_SEQ = 1 << R.PRESENT.index("coll_seq")
_HAS_OFFSET = 1 << R.PRESENT.index("offset")
_HAS_SIZE = 1 << R.PRESENT.index("size")
_HAS_RID = 1 << R.PRESENT.index("rid")
_CALL, _WAIT = R.KINDS.index("call"), R.KINDS.index("wait")
#: the non-blocking calls (their I/O may be done by another thread, e.g. POSIX AIO's)
_NONBLOCKING = np.array([i for i, f in enumerate(R.FUNCS) if f.startswith("MPI_File_i")])
#: the functions whose calls move data (their records' file ranges say which bytes)
_DATA = frozenset(i for i, f in enumerate(R.FUNCS) if any(
    f.startswith(f"MPI_File_{p}{v}") for p in ("", "i") for v in ("read", "write")))


@dataclass(frozen=True)
class Caller:
    """The thread doing an operation: its rank (None: not a rank's), its call (None: not in one), the
    call's function and record (None: not written yet)."""

    rank: int | None
    callid: int | None = None
    func: str = ""
    record: int | None = None


NOBODY = Caller(None)


def same_file(opened: str, path: str) -> bool:
    """Is ``path`` (on the mount) the file a program opened as ``opened`` (ROMIO takes a prefix naming
    its driver, e.g. ``ufs:``; a relative name is compared by its end)?"""
    name = re.sub(r"^[A-Za-z0-9_]{2,}:", "", opened)
    if name.startswith("/"):
        return os.path.normpath(name) == path
    return path.endswith("/" + os.path.normpath(name))


class _Rank:
    """One rank's records, read as its files grow (the library grows them in windows of zeros: a
    record is whole once it carries the magic)."""

    BATCH = 256  # records read at once

    def __init__(self, rec: Path, dat: Path) -> None:
        self.rec, self.dat = rec, dat
        self.seen = 0  # records indexed so far
        self._fds: dict[Path, int] = {}

    def _read(self, path: Path, offset: int, n: int) -> bytes:
        fd = self._fds.get(path)
        if fd is None:
            try:
                fd = self._fds[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return b""
        return os.pread(fd, n, offset)

    def new_records(self) -> np.ndarray:
        """The whole records written since the last call (stops before one being written)."""
        size = R.RECORD.itemsize
        found = []
        while True:
            raw = self._read(self.rec, self.seen * size, self.BATCH * size)
            recs = np.frombuffer(raw[: len(raw) // size * size], R.RECORD)
            stop = np.flatnonzero(recs["magic"] != R.MAGIC)
            if len(stop):
                recs = recs[: stop[0]]
            found.append(recs)
            self.seen += len(recs)
            if len(recs) < self.BATCH:
                return np.concatenate(found) if len(found) > 1 else found[0]

    def record(self, index: int) -> np.void | None:
        raw = self._read(self.rec, index * R.RECORD.itemsize, R.RECORD.itemsize)
        if len(raw) < R.RECORD.itemsize:
            return None
        rec = np.frombuffer(raw, R.RECORD)[0]
        return rec if rec["magic"] == R.MAGIC else None

    def file(self, rec: np.void) -> str:
        """The file name a record names ("": none)."""
        n = int(rec["len_file"])
        if n == R.NULL_LEN:
            return ""
        return self._read(self.dat, int(rec["strings_at"]), n).decode(errors="replace")

    def ranges(self, rec: np.void) -> list[tuple[int, int]] | None:
        """The file ranges of a data call's record (None: not known)."""
        n = int(rec["n_regions"])
        if n == R.UNKNOWN or not rec["present"] & _HAS_OFFSET:
            return None
        if n == 0:
            return [(int(rec["offset"]), int(rec["size"]))] if rec["present"] & _HAS_SIZE else None
        pairs = np.frombuffer(self._read(self.dat, int(rec["regions_at"]), 16 * n), np.int64)
        if len(pairs) < 2 * n:
            return None
        return list(zip(pairs[0::2].tolist(), pairs[1::2].tolist(), strict=True))


class Calls:
    """The slots and records of one run's ranks, as the FUSE client sees them."""

    def __init__(self, slots: Path, records: Path, sentinel: int) -> None:
        fd = os.open(slots, os.O_RDONLY)
        try:
            self._map = mmap.mmap(fd, R.SLOT.itemsize * R.NSLOTS, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
        self.slots = np.frombuffer(self._map, R.SLOT)
        self.dir = records
        self.sentinel = sentinel
        self._ranks: dict[int, _Rank] = {}
        self._by_coll: dict[int, list[tuple[int, int]]] = {}  # coll_seq -> (rank, record index)
        self._pending: dict[int, set[int]] = {}  # rank -> record indices of calls not completed
        self._seen_ranks: set[int] = set()
        self._lock = threading.Lock()

    def caller(self, tid: int) -> Caller | None:
        """Who thread ``tid`` is, from its slot (None: it has none); a thread's slot does not change
        while it waits for its own operation."""
        found = np.flatnonzero(self.slots["tid"] == tid)
        if not len(found):
            return None
        slot = self.slots[found[0]]
        callid = int(slot["callid"])
        if callid == self.sentinel:
            return Caller(int(slot["rank"]))
        func = R.FUNCS[slot["func"]] if slot["func"] < len(R.FUNCS) else "MPI_File_unknown"
        record = int(slot["record"])
        return Caller(int(slot["rank"]), callid, func, None if record == R.NO_RECORD else record)

    def of_process(self, pid: int) -> Caller:
        """The rank of process ``pid``, if a thread of it has a slot (another thread of a rank: one the
        MPI library started, e.g. for POSIX AIO)."""
        found = np.flatnonzero(self.slots["pid"] == pid)
        return Caller(int(self.slots[found[0]]["rank"])) if len(found) else NOBODY

    def _rank(self, rank: int) -> _Rank:
        if rank not in self._ranks:
            self._ranks[rank] = _Rank(*R.rank_files(self.dir, rank))
        return self._ranks[rank]

    def context(self, caller: Caller, path: str, extent: tuple[int, int] | None) -> CallContext:
        """The context of an operation of ``caller`` (in a call) on ``path``'s range ``extent`` (None:
        no data): its call alone, or the calls of a collective on that file whose bytes the range holds."""
        assert caller.rank is not None and caller.callid is not None
        alone = CallContext((caller.callid,), caller.func)
        rank = self._rank(caller.rank)
        rec = rank.record(caller.record) if caller.record is not None else None
        if (rec is None or extent is None or int(rec["func"]) not in _DATA
                or not same_file(rank.file(rec), path)):
            return alone
        lo, hi = extent[0], extent[0] + extent[1]
        if not rec["flags"] & _COLLECTIVE or not rec["present"] & _HAS_COLL_SEQ:
            return self._own(alone, rank.ranges(rec), lo, hi)
        return self._collective_context(alone, int(rec["coll_seq"]), lo, hi)

    def _collective_context(self, alone: CallContext, coll_seq: int, lo: int, hi: int) -> CallContext:
        """The context of an operation on ``[lo, hi)`` in collective ``coll_seq``: the calls whose bytes
        the range holds, and where (``alone``: the caller's call, when only its bytes are there)."""
        peers = self._collective(coll_seq)
        callids: list[int] = []
        owners: list[tuple[int, int, int]] = []
        for peer_rank, index in peers:
            peer = self._rank(peer_rank)
            prec = peer.record(index)
            if prec is None:
                continue
            ranges = peer.ranges(prec)
            if ranges is None:  # whose bytes are where is not known: every call of the collective
                return self._every(peers, alone.func)
            mine = [(max(o, lo), min(o + n, hi)) for o, n in ranges if o < hi and o + n > lo]
            if mine:
                owners += [(a, b - a, len(callids)) for a, b in mine]
                callids.append(int(prec["callid"]))
        if len(callids) < 2 and (not callids or callids[0] == alone.callids[0]):
            return alone
        return CallContext(tuple(callids), alone.func, tuple(owners))

    def _every(self, peers: list[tuple[int, int]], func: str) -> CallContext:
        """The context of every call of a collective (its records ``peers``), not saying whose bytes."""
        every = (self._rank(r).record(i) for r, i in peers)
        return CallContext(tuple(int(p["callid"]) for p in every if p is not None), func, known=False)

    @staticmethod
    def _own(alone: CallContext, ranges: list[tuple[int, int]] | None, lo: int, hi: int) -> CallContext:
        """The context of a call's own operation on ``[lo, hi)``: where its bytes do not fill the range
        (ROMIO's data sieving reads and writes the extent its blocks span), whose bytes are where."""
        if ranges is None:
            return alone
        mine = [(max(o, lo), min(o + n, hi)) for o, n in ranges if o < hi and o + n > lo]
        if sum(b - a for a, b in mine) == hi - lo:
            return alone
        owners = tuple((a, b - a, 0) for a, b in mine) or ((lo, 0, 0),)  # (none of its bytes: all holes)
        return CallContext(alone.callids, alone.func, owners)

    def pending(self, rank_nr: int, path: str, extent: tuple[int, int] | None) -> CallContext | None:
        """The context of an operation a thread of rank ``rank_nr`` without a call of its own does (the
        MPI library's POSIX AIO): its rank's non-blocking calls not yet completed on ``path`` whose file
        ranges hold ``extent``; None if there are none (several: every one, at request level)."""
        if extent is None:
            return None
        with self._lock:
            self._index()
            found = []
            rank = self._rank(rank_nr)
            for index in sorted(self._pending.get(rank_nr, ())):
                rec = rank.record(index)
                ranges = rank.ranges(rec) if rec is not None else None
                if ranges is None or not same_file(rank.file(rec), path):
                    continue
                lo, hi = extent[0], extent[0] + extent[1]
                if any(o < hi and o + n > lo for o, n in ranges):
                    found.append(rec)
        if not found:
            return None
        funcs = {R.FUNCS[int(rec["func"])] for rec in found}
        return CallContext(tuple(int(rec["callid"]) for rec in found),
                           funcs.pop() if len(funcs) == 1 else "MPI_File_i*", known=len(found) == 1)

    def _collective(self, coll_seq: int) -> list[tuple[int, int]]:
        """The records of collective ``coll_seq`` on every rank (indexing what was written since)."""
        with self._lock:
            self._index()
            return list(self._by_coll.get(coll_seq, ()))

    def _index(self) -> None:
        """Index the records written since the last look: collective calls by ``coll_seq``, and the
        non-blocking calls not yet completed."""
        for rank_nr in self._known_ranks():
            rank = self._rank(rank_nr)
            start = rank.seen
            recs = rank.new_records()
            for i in np.flatnonzero((recs["present"] & _HAS_COLL_SEQ) != 0).tolist():
                self._by_coll.setdefault(int(recs[i]["coll_seq"]), []).append((rank_nr, start + i))
            pending = self._pending.setdefault(rank_nr, set())
            pending.update((start + np.flatnonzero((recs["kind"] == _CALL)
                                                   & np.isin(recs["func"], _NONBLOCKING))).tolist())
            done = set(recs["rid"][recs["kind"] == _WAIT].tolist())
            if done:  # (a call's request id is in its record once the call returned)
                pending -= {k for k in pending if (r := rank.record(k)) is not None
                            and r["present"] & _HAS_RID and int(r["rid"]) in done}

    def _known_ranks(self) -> list[int]:
        """The ranks that have made a call: those with a slot (or that had one)."""
        self._seen_ranks.update(np.unique(self.slots["rank"][self.slots["tid"] != 0]).tolist())
        return sorted(self._seen_ranks)
