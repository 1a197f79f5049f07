"""Whose bytes each disk operation of an aggregated request moves, as the client works it out.

An aggregator's request to one datafile is a stream: the datafile's share of each of the
request's file regions, in order.  The server cuts the stream into flow buffers
(``distribution.flow_buffers``) and writes or reads each with one Trove operation; a small
I/O is one operation.  The client knows the same stream and the owners of the bytes (the
call's ``owners``: file ranges, each with the index of its CallID), so it says, per
operation, which calls own bytes of it and how many: ``protocol.encode_callid_bytes``.
That is exact for any number of owned ranges, and its size grows with the operations and
the calls in each, not with the ranges.  :func:`split_items` cuts a request's stream where
a request carrying all of it would be too large.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from server_sim import protocol as P

#: One region of a request on one datafile: the region ``(file offset, length)``, the pieces of
#: the datafile's share of it ``((stream position, length), ...)`` and the region's stream position.
Item = tuple[tuple[int, int], tuple[tuple[int, int], ...], int]


class Owners:
    """The owners of an access's bytes as disjoint sorted file ranges, each with the indices of
    the calls owning it (several where calls read the same bytes)."""

    __slots__ = ("ends", "ids", "starts")

    def __init__(self, owners: Sequence[tuple[int, int, int]]) -> None:
        ranges = sorted((o, o + n, i) for o, n, i in owners if n > 0)
        if all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:])):  # the usual case: no overlap
            self.starts = [a for a, _, _ in ranges]
            self.ends = [b for _, b, _ in ranges]
            self.ids = [(i,) for _, _, i in ranges]
            return
        points = sorted({p for a, b, _ in ranges for p in (a, b)})
        self.starts, self.ends, self.ids = [], [], []
        active: dict[int, int] = {}
        opening = sorted(((a, i) for a, _, i in ranges), reverse=True)
        closing = sorted(((b, i) for _, b, i in ranges), reverse=True)
        for lo, hi in zip(points, points[1:]):
            while closing and closing[-1][0] <= lo:
                _, i = closing.pop()
                active[i] -= 1
                if not active[i]:
                    del active[i]
            while opening and opening[-1][0] <= lo:
                _, i = opening.pop()
                active[i] = active.get(i, 0) + 1
            if active:
                self.starts.append(lo)
                self.ends.append(hi)
                self.ids.append(tuple(sorted(active)))

    def add(self, into: dict[int, int], lo: int, hi: int) -> None:
        """Add the owned bytes of file range ``[lo, hi)`` to ``into`` (index -> bytes)."""
        starts, ends, ids = self.starts, self.ends, self.ids
        j = bisect.bisect_right(ends, lo)
        while j < len(starts) and starts[j] < hi:
            n = min(ends[j], hi) - max(starts[j], lo)
            for i in ids[j]:
                into[i] = into.get(i, 0) + n
            j += 1


def owned_per_buffer(items: Sequence[Item], owners: Owners | None, ncallids: int,
                     buffer_size: int) -> list[P.Owned]:
    """Per Trove operation of a request (its stream cut every ``buffer_size`` bytes, as the
    server cuts it): ``(index, owned bytes)`` of each call owning bytes of it, by index.
    ``owners`` None: every call owns every byte."""
    out: list[P.Owned] = []
    current: dict[int, int] = {}
    filled = 0

    def close() -> None:
        nonlocal current, filled
        if owners is None:
            out.append(tuple((i, filled) for i in range(ncallids)))
        else:
            out.append(tuple(sorted(current.items())))
        current, filled = {}, 0

    for (off, _), pieces, pos in items:
        for p, k in pieces:
            lo = off + p - pos
            while k:
                n = min(k, buffer_size - filled)
                if owners is not None:
                    owners.add(current, lo, lo + n)
                filled += n
                lo += n
                k -= n
                if filled == buffer_size:
                    close()
    if filled:
        close()
    return out


def stream_bytes(items: Sequence[Item]) -> int:
    """The bytes of a request's stream."""
    return sum(k for _, pieces, _ in items for _, k in pieces)


def split_items(items: Sequence[Item], cut: int) -> tuple[list[Item], list[Item]]:
    """A request's items cut after ``cut`` bytes of its stream (0 < cut < its bytes): a region
    holding the cut is split at the file offset of the first byte after it."""
    left: list[Item] = []
    right: list[Item] = []
    done = 0
    for item in items:
        (off, length), pieces, pos = item
        nbytes = sum(k for _, k in pieces)
        if done + nbytes <= cut:
            left.append(item)
        elif done >= cut:
            right.append(item)
        else:
            need = cut - done
            lp: list[tuple[int, int]] = []
            rp: list[tuple[int, int]] = []
            for p, k in pieces:
                if need >= k:
                    lp.append((p, k))
                    need -= k
                elif need:
                    lp.append((p, need))
                    rp.append((p + need, k - need))
                    need = 0
                else:
                    rp.append((p, k))
            first = rp[0][0]  # stream position of the first byte after the cut
            at = off + first - pos
            left.append(((off, at - off), tuple(lp), pos))
            right.append(((at, off + length - at), tuple(rp), first))
        done += nbytes
    return left, right
