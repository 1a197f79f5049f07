"""Which CallIDs a disk operation serves, from a request's CallIDs and ``callid_map`` hint.

An aggregator's request serves several calls.  With a ``callid_map`` the server
attributes each Trove operation to exactly the calls whose bytes it moves: its
physical pieces are mapped back to logical file ranges (simple_stripe) and
intersected with the map.  Bytes no call owns (the holes of a read-modify-write)
fall back to every CallID of the request.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

from server_sim.distribution import SimpleStripe

Attribution = Callable[[Sequence[tuple[int, int]]], list[int]]


def attribution(callids: list[int], callid_map: Sequence[int], dist: SimpleStripe,
                dfile: int) -> Attribution | None:
    """A function from a disk operation's physical pieces (on datafile ``dfile``) to the
    CallIDs it serves; None when every operation serves all of ``callids`` (no map, or
    fewer than two CallIDs)."""
    if len(callids) < 2 or not callid_map:
        return None
    ranges = sorted(zip(callid_map[0::3], callid_map[1::3], callid_map[2::3]))
    starts = [r[0] for r in ranges]

    def callids_for(pieces: Sequence[tuple[int, int]]) -> list[int]:
        found: set[int] = set()
        for phys, n in pieces:
            while n > 0:
                k = min(n, dist.strip_size - phys % dist.strip_size)
                lo = dist.physical_to_logical(dfile, phys)
                # ranges may overlap (several calls reading the same bytes): check every range
                # that starts before this piece ends (at most MAX_CALLID_MAP of them)
                for off, length, idx in ranges[:bisect.bisect_left(starts, lo + k)]:
                    if off + length > lo and idx < len(callids):
                        found.add(idx)
                phys, n = phys + k, n - k
        if not found or len(found) == len(callids):
            return callids
        return [callids[i] for i in sorted(found)]

    return callids_for
