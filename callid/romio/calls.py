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
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from callid.mpiio.call import CallContext
from callid.romio import records as R

__all__ = ["Calls", "Caller"]

_COLLECTIVE = 1 << R.FLAGS.index("collective")
_HAS_COLL_SEQ = 1 << R.PRESENT.index("coll_seq")
_HAS_OFFSET = 1 << R.PRESENT.index("offset")
_HAS_SIZE = 1 << R.PRESENT.index("size")
#: the functions whose calls move data (their records' file ranges say which bytes)
_DATA = frozenset(i for i, f in enumerate(R.FUNCS) if any(
    f.startswith(f"MPI_File_{p}{v}") for p in ("", "i") for v in ("read", "write")))


@dataclass(frozen=True)
class Caller:
    """The thread doing an operation: its rank (None: not a rank's) and its call (None: not in one)."""

    rank: int | None
    callid: int | None
    record: int | None


class _Rank:
    """One rank's records, read as its files grow."""

    def __init__(self, rec: Path, dat: Path) -> None:
        self.rec, self.dat = rec, dat
        self.seen = 0  # records indexed so far

    def new_records(self) -> np.ndarray:
        """The whole records written since the last call (stops before one being written)."""
        try:
            with open(self.rec, "rb") as f:
                f.seek(self.seen * R.RECORD.itemsize)
                raw = f.read()
        except FileNotFoundError:
            return np.zeros(0, R.RECORD)
        recs = np.frombuffer(raw[: len(raw) // R.RECORD.itemsize * R.RECORD.itemsize], R.RECORD)
        whole = np.flatnonzero(recs["magic"] != R.MAGIC)
        if len(whole):
            recs = recs[: whole[0]]
        self.seen += len(recs)
        return recs

    def record(self, index: int) -> np.void | None:
        try:
            with open(self.rec, "rb") as f:
                f.seek(index * R.RECORD.itemsize)
                raw = f.read(R.RECORD.itemsize)
        except FileNotFoundError:
            return None
        if len(raw) < R.RECORD.itemsize:
            return None
        rec = np.frombuffer(raw, R.RECORD)[0]
        return rec if rec["magic"] == R.MAGIC else None

    def ranges(self, rec: np.void) -> list[tuple[int, int]] | None:
        """The file ranges of a data call's record (None: not known)."""
        n = int(rec["n_regions"])
        if n == R.UNKNOWN or not rec["present"] & _HAS_OFFSET:
            return None
        if n == 0:
            return [(int(rec["offset"]), int(rec["size"]))] if rec["present"] & _HAS_SIZE else None
        with open(self.dat, "rb") as f:
            f.seek(int(rec["regions_at"]))
            pairs = np.frombuffer(f.read(16 * n), np.int64)
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
        self._lock = threading.Lock()

    def caller(self, tid: int) -> Caller:
        """Who thread ``tid`` is: its slot, if it has one (a thread's slot does not change while it
        waits for its own operation)."""
        found = np.flatnonzero(self.slots["tid"] == tid)
        if not len(found):
            return Caller(None, None, None)
        slot = self.slots[found[0]]
        callid = int(slot["callid"])
        if callid == self.sentinel:
            return Caller(int(slot["rank"]), None, None)
        record = int(slot["record"])
        return Caller(int(slot["rank"]), callid, None if record == 2 ** 64 - 1 else record)

    def _rank(self, rank: int) -> _Rank:
        if rank not in self._ranks:
            self._ranks[rank] = _Rank(*R.rank_files(self.dir, rank))
        return self._ranks[rank]

    def context(self, caller: Caller, extent: tuple[int, int] | None) -> CallContext:
        """The context of an operation of ``caller`` (in a call) on file range ``extent`` (None: no
        data): its call alone, or the calls of a collective whose bytes the range holds."""
        assert caller.rank is not None and caller.callid is not None
        rank = self._rank(caller.rank)
        rec = rank.record(caller.record) if caller.record is not None else None
        if rec is None:
            return CallContext((caller.callid,), "MPI_File_unknown")
        func = R.FUNCS[int(rec["func"])] if rec["func"] < len(R.FUNCS) else "MPI_File_unknown"
        alone = CallContext((caller.callid,), func)
        if (extent is None or int(rec["func"]) not in _DATA or not rec["flags"] & _COLLECTIVE
                or not rec["present"] & _HAS_COLL_SEQ):
            return alone
        peers = self._collective(int(rec["coll_seq"]))
        lo, hi = extent[0], extent[0] + extent[1]
        callids: list[int] = []
        owners: list[tuple[int, int, int]] = []
        for peer_rank, index in peers:
            peer = self._rank(peer_rank)
            prec = peer.record(index)
            if prec is None:
                continue
            ranges = peer.ranges(prec)
            if ranges is None:  # whose bytes are where is not known: every call of the collective
                return CallContext(tuple(int(self._rank(r).record(i)["callid"]) for r, i in peers),
                                   func, known=False)
            mine = [(max(o, lo), min(o + n, hi)) for o, n in ranges if o < hi and o + n > lo]
            if mine:
                owners += [(a, b - a, len(callids)) for a, b in mine]
                callids.append(int(prec["callid"]))
        if len(callids) < 2 and (not callids or callids[0] == caller.callid):
            return alone
        return CallContext(tuple(callids), func, tuple(owners))

    def _collective(self, coll_seq: int) -> list[tuple[int, int]]:
        """The records of collective ``coll_seq`` on every rank (indexing what was written since)."""
        with self._lock:
            for rank_nr in self._known_ranks():
                rank = self._rank(rank_nr)
                start = rank.seen
                recs = rank.new_records()
                coll = np.flatnonzero((recs["present"] & _HAS_COLL_SEQ) != 0)
                for i in coll.tolist():
                    self._by_coll.setdefault(int(recs[i]["coll_seq"]), []).append((rank_nr, start + i))
            return list(self._by_coll.get(coll_seq, ()))

    def _known_ranks(self) -> list[int]:
        return sorted(int(p.name[len("romio-rank"):-len(".rec")]) for p in self.dir.glob("romio-rank*.rec"))
