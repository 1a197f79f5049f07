"""Two-phase collective buffering for collective data access, as ROMIO does it.

1. Every rank tells the others the file range its access covers (allgather).
2. ``cb_nodes`` aggregators (default: one per simulated host) split the whole
   range into contiguous file domains.
3. Ranks exchange data with the aggregators over MPI (alltoall).
4. Each aggregator accesses its domain in pieces of at most ``cb_buffer_size``
   bytes: one request per datafile for each piece, carrying the CallIDs of every
   call whose data the piece holds.  A write piece with holes is read first and
   written back whole (read-modify-write).

The hints ``romio_cb_write`` / ``romio_cb_read`` (enable, disable, automatic)
choose between this and independent access; automatic uses it when the ranks'
ranges interleave.

Each rank logs the phases of its call (one row each, ``kind='phase'``, the call's CallID):
``plan`` (1.), ``exchange`` (3.; a read has two: the asks, then the data), ``io`` (4., one
per cycle of an aggregator, its bytes) and ``wait`` (the agreement on errors, where the
ranks wait for the aggregators' I/O; a read agrees before it sends the data back).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from mpi4py import MPI

from callid.mpiio.call import CallContext
from callid.mpiio.datatypes import Runs
from callid.mpiio.errors import SimIOError
from callid.mpiio.sysint import FileAttrs, FsError, SysInt
from callid_core import clock
from callid_core.config import DEFAULT_CB_BUFFER_SIZE, host_of
from server_sim import protocol as P

#: the values of the hints romio_cb_write and romio_cb_read (ROMIO's)
CB_MODES = ("enable", "disable", "automatic")


@dataclass(frozen=True)
class CbHints:
    """The collective-buffering hints in effect for one file."""

    cb_nodes: int
    cb_buffer_size: int
    romio_cb_write: str
    romio_cb_read: str

    @classmethod
    def from_info(cls, info: dict[str, str], hosts: int) -> CbHints:
        def number(key: str, default: int) -> int:
            try:
                return max(1, int(info.get(key) or default))
            except ValueError:
                return default

        def mode(key: str) -> str:
            value = (info.get(key) or "automatic").lower()
            return value if value in CB_MODES else "automatic"

        return cls(number("cb_nodes", hosts), number("cb_buffer_size", DEFAULT_CB_BUFFER_SIZE),
                   mode("romio_cb_write"), mode("romio_cb_read"))

    def mode(self, io_type: P.IoType) -> str:
        """enable, disable or automatic: the hint for this direction."""
        return self.romio_cb_write if io_type == P.IoType.WRITE else self.romio_cb_read

    def as_info(self) -> dict[str, str]:
        return {"cb_nodes": str(self.cb_nodes), "cb_buffer_size": str(self.cb_buffer_size),
                "romio_cb_write": self.romio_cb_write, "romio_cb_read": self.romio_cb_read}


def aggregators(world_ranks: list[int], ranks_per_host: int, cb_nodes: int) -> list[int]:
    """Ranks (in the file's communicator) that aggregate: first one per host, then seconds, ..."""
    by_host: dict[int, list[int]] = {}
    for rank, world in enumerate(world_ranks):
        by_host.setdefault(host_of(world, ranks_per_host), []).append(rank)
    order = [ranks[i] for i in range(max(map(len, by_host.values())))
             for ranks in by_host.values() if i < len(ranks)]
    return sorted(order[:min(cb_nodes, len(order))])


def file_domains(ranges: list[tuple[int | None, int | None]], aggs: int,
                 mode: str) -> list[tuple[int, int]] | None:
    """The aggregators' contiguous file domains over the ranks' ``(lo, hi)`` ranges (``(None, None)``:
    a rank that accesses nothing), or None for independent access: ``mode`` disable, nothing
    accessed, or automatic and the ranges do not interleave."""
    used = sorted(r for r in ranges if r[0] is not None)
    if mode == "disable" or not used:
        return None
    if mode == "automatic" and not any(b[0] < a[1] for a, b in zip(used, used[1:])):
        return None
    start, end = used[0][0], max(r[1] for r in used)
    size = -(-(end - start) // aggs)
    return [(start + i * size, min(end, start + (i + 1) * size)) for i in range(aggs)]


def overlap(runs: Runs, lo: int, hi: int) -> list[tuple[int, int, int]]:
    """Parts of ``runs`` inside ``[lo, hi)``: ``(file offset, length, stream position)``."""
    out, pos = [], 0
    for off, n in runs:
        a, b = max(off, lo), min(off + n, hi)
        if a < b:
            out.append((a, b - a, pos + a - off))
        pos += n
    return out


def _covered(pieces: list[tuple[int, int]]) -> Runs:
    """Union of possibly overlapping ``(offset, length)`` pieces, sorted."""
    out: Runs = []
    for off, n in sorted(pieces):
        if out and off <= out[-1][0] + out[-1][1]:
            end = max(out[-1][0] + out[-1][1], off + n)
            out[-1] = (out[-1][0], end - out[-1][0])
        else:
            out.append((off, n))
    return out


class TwoPhase:
    """One collective access of the file's communicator."""

    def __init__(self, sysint: SysInt, comm: MPI.Intracomm | None, attrs: FileAttrs, hints: CbHints,
                 world_ranks: list[int], ranks_per_host: int) -> None:
        self.sysint, self.comm, self.attrs, self.hints = sysint, comm, attrs, hints
        self.aggs = aggregators(world_ranks, ranks_per_host, hints.cb_nodes)
        self.on_phase = sysint.on_phase

    def _phase(self, call: CallContext, phase: str, t0: int, **extra) -> int:
        """Log a phase of this rank's call that began at ``t0`` and ends now; return now."""
        t1 = clock.now()
        self.on_phase(call.callids[0], call.func, phase, t0, t1, **extra)
        return t1

    def plan(self, io_type: P.IoType, regions: Runs, call: CallContext) -> list[tuple[int, int]] | None:
        """The aggregators' file domains, or None for independent access (same on all ranks)."""
        t0 = clock.now()
        lo = regions[0][0] if regions else None
        hi = max((o + n for o, n in regions), default=None)
        ranges = self.comm.allgather((lo, hi))
        self._phase(call, "plan", t0)
        return file_domains(ranges, len(self.aggs), self.hints.mode(io_type))

    def _agreed(self, error: tuple[int, str, bool] | None, call: CallContext) -> None:
        """Raise on every rank if any aggregator failed (the ``wait`` phase: the ranks wait for the
        aggregators' I/O here)."""
        t0 = clock.now()
        errors = [e for e in self.comm.allgather(error) if e is not None]
        self._phase(call, "wait", t0, error=errors[0][1] if errors else None)
        if errors:
            raise SimIOError(*errors[0])

    def write(self, domains: list[tuple[int, int]], regions: Runs, data: memoryview,
              call: CallContext) -> None:
        """Phase 1: send each aggregator my data in its domain; phase 2: aggregators write.

        ``call``: this rank's call (one CallID); the aggregators' requests carry the CallIDs
        of every call whose data they hold, under the collective's function."""
        t0 = clock.now()
        send = [None] * self.comm.Get_size()
        sent = 0
        for agg, (lo, hi) in zip(self.aggs, domains):
            parts = overlap(regions, lo, hi)
            if parts:
                send[agg] = (call.callids[0], [(o, n) for o, n, _ in parts],
                             b"".join(data[p:p + n] for _, n, p in parts))
                sent += len(send[agg][2]) if agg != self.comm.Get_rank() else 0
        received = [r for r in self.comm.alltoall(send) if r is not None]
        self._phase(call, "exchange", t0, nbytes=sent)
        error = None
        if self.comm.Get_rank() in self.aggs:
            try:
                self.write_domain(received, call)
            except FsError as exc:
                error = (MPI.ERR_IO, str(exc), exc.fs_failed)
        self._agreed(error, call)

    def write_domain(self, received: list, mine: CallContext) -> None:
        """Write the domain's data in cycles of ``cb_buffer_size`` bytes.

        ``received``: ``(CallID, file runs, their bytes)`` of each call with data in the domain, in
        rank order; ``mine``: this rank's call, whose ``io`` phases they are (each cycle begins where
        the last ended)."""
        t0 = clock.now()
        func = mine.func
        pieces = []  # (offset, length, data, callid) in rank order
        for cid, runs, blob in received:
            pos = 0
            for off, n in runs:
                pieces.append((off, n, memoryview(blob)[pos:pos + n], cid))
                pos += n
        if not pieces:
            return
        lo = min(p[0] for p in pieces)
        hi = max(p[0] + p[1] for p in pieces)
        step = self.hints.cb_buffer_size
        for c0 in range(lo, hi, step):
            c1 = min(hi, c0 + step)
            parts = [(max(o, c0), min(o + n, c1), d[max(o, c0) - o:min(o + n, c1) - o], cid)
                     for o, n, d, cid in pieces if o < c1 and o + n > c0]
            if not parts:
                continue
            ids = tuple(sorted({cid for *_, cid in parts}))
            cover = _covered([(a, b - a) for a, b, _, _ in parts])
            first, last = cover[0][0], cover[-1][0] + cover[-1][1]
            buf = bytearray(last - first)
            call = CallContext(ids, func, _owners([(a, b, cid) for a, b, _, cid in parts], ids))
            error = None
            try:
                if len(cover) > 1:  # holes: read-modify-write the whole extent
                    self.sysint.io(self.attrs, P.IoType.READ, [(first, last - first)], memoryview(buf), call)
                for a, b, d, _ in parts:  # in rank order: the highest rank wins where writes overlap
                    buf[a - first:b - first] = d
                self.sysint.io(self.attrs, P.IoType.WRITE, [(first, last - first)], memoryview(buf), call)
            except FsError as exc:
                error = str(exc)
                raise
            finally:
                t0 = self._phase(mine, "io", t0, offset=first, size=last - first,
                                 nbytes=sum(b - a for a, b, _, _ in parts), error=error)

    def read(self, domains: list[tuple[int, int]], regions: Runs, data: memoryview, call: CallContext) -> int:
        """Phase 1: aggregators read what was asked in their domain; phase 2: send it to each rank
        (``call`` as for :meth:`write`).  The ranks agree on errors before the data goes back, so
        the second exchange only moves data."""
        t0 = clock.now()
        asks = [None] * self.comm.Get_size()
        for agg, (lo, hi) in zip(self.aggs, domains):
            parts = overlap(regions, lo, hi)
            if parts:
                asks[agg] = (call.callids[0], [(o, n) for o, n, _ in parts])
        received = self.comm.alltoall(asks)
        self._phase(call, "exchange", t0, nbytes=0)
        answers: list = [None] * self.comm.Get_size()
        error = None
        if self.comm.Get_rank() in self.aggs:
            try:
                answers = self.read_domain(received, call)
            except FsError as exc:
                error = (MPI.ERR_IO, str(exc), exc.fs_failed)
        self._agreed(error, call)
        t0 = clock.now()
        me = self.comm.Get_rank()
        sent = sum(len(blob) for rank, reply in enumerate(answers) if rank != me
                   for _, _, blob, _ in reply or ())
        replies = self.comm.alltoall(answers)
        starts = list(_stream_starts(regions))
        done = 0
        for reply in replies:
            for off, n, blob, valid in reply or ():
                i = bisect.bisect_right([o for o, _ in regions], off) - 1
                pos = starts[i] + off - regions[i][0]
                data[pos:pos + n] = blob
                done += valid
        self._phase(call, "exchange", t0, nbytes=sent)
        return done

    def read_domain(self, received: list, mine: CallContext) -> list:
        """Read the domain in cycles; the answer to each rank (``received``: each rank's
        ``(CallID, file runs)`` or None; ``mine`` as for :meth:`write_domain`)."""
        t0 = clock.now()
        wanted = _wanted(received)
        answers: list = [[] for _ in received]
        if not wanted:
            return answers
        lo = min(w[2] for w in wanted)
        hi = max(w[2] + w[3] for w in wanted)
        step = self.hints.cb_buffer_size
        for c0 in range(lo, hi, step):
            c1 = min(hi, c0 + step)
            parts = [(rank, cid, max(o, c0), min(o + n, c1)) for rank, cid, o, n in wanted
                     if o < c1 and o + n > c0]
            if parts:
                t0 = self._read_cycle(parts, mine, t0, answers)
        return answers

    def _read_cycle(self, parts: list[tuple[int, int, int, int]], mine: CallContext, t0: int,
                    answers: list) -> int:
        """Read one cycle's ``(rank, CallID, start, end)`` parts into ``answers``; log its ``io`` phase."""
        cover = _covered([(a, b - a) for _, _, a, b in parts])
        buf = memoryview(bytearray(sum(n for _, n in cover)))
        ids = tuple(sorted({cid for _, cid, _, _ in parts}))
        call = CallContext(ids, mine.func, _owners([(a, b, cid) for _, cid, a, b in parts], ids))
        error = None
        try:
            got = self.sysint.io(self.attrs, P.IoType.READ, cover, buf, call)
            _answer(parts, cover, buf, _end_of_data(cover, got), answers)
        except FsError as exc:
            error = str(exc)
            raise
        finally:
            first, last = cover[0][0], cover[-1][0] + cover[-1][1]
            t0 = self._phase(mine, "io", t0, offset=first, size=last - first,
                             nbytes=sum(n for _, n in cover), error=error)
        return t0


def _wanted(received: list) -> list[tuple[int, int, int, int]]:
    """``(rank, CallID, offset, length)`` of every run the ranks asked for, in rank order."""
    return [(rank, cid, off, n) for rank, ask in enumerate(received) if ask
            for cid in [ask[0]] for off, n in ask[1]]


def _answer(parts: list[tuple[int, int, int, int]], cover: Runs, buf: memoryview, eof: int,
            answers: list) -> None:
    """Append each part's ``(offset, length, bytes, valid bytes)`` read into ``buf`` to its rank's answer."""
    starts = list(_stream_starts(cover))
    for rank, _, a, b in parts:
        i = bisect.bisect_right([o for o, _ in cover], a) - 1
        pos = starts[i] + a - cover[i][0]
        answers[rank].append((a, b - a, bytes(buf[pos:pos + b - a]), max(0, min(b, eof) - a)))


def _owners(parts: list[tuple[int, int, int]], ids: tuple[int, ...]) -> tuple[tuple[int, int, int], ...]:
    """``(offset, length, index of the CallID in ids)`` per part, touching ranges of one owner joined."""
    out: list[tuple[int, int, int]] = []
    for a, b, cid in sorted(parts):
        idx = ids.index(cid)
        if out and out[-1][2] == idx and out[-1][0] + out[-1][1] == a:
            out[-1] = (out[-1][0], b - out[-1][0], idx)
        else:
            out.append((a, b - a, idx))
    return tuple(out)


def _stream_starts(runs: Runs):
    pos = 0
    for _, n in runs:
        yield pos
        pos += n


def _end_of_data(runs: Runs, done: int) -> int:
    """File offset where the data of a read of ``runs`` that returned ``done`` bytes ends."""
    for off, n in runs:
        if done < n:
            return off + done
        done -= n
    return 1 << 62  # everything was there
