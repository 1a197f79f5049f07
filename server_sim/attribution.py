"""Which CallIDs a disk operation serves, from a request's ``callid`` and ``callid_map`` hints.

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

Hints = dict
Attribution = Callable[[Sequence[tuple[int, int]]], Hints]


def attribution(hints: Hints, dist: SimpleStripe, dfile: int) -> Attribution:
    """A function from a disk operation's physical pieces to the hints to log it with."""
    ids = hints.get("callid") or []
    flat = hints.get("callid_map") or []
    if len(ids) < 2 or not flat:
        return lambda pieces: hints
    ranges = sorted(zip(flat[0::3], flat[1::3], flat[2::3]))
    starts = [r[0] for r in ranges]

    def hints_for(pieces: Sequence[tuple[int, int]]) -> Hints:
        found: set[int] = set()
        for phys, n in pieces:
            while n > 0:
                k = min(n, dist.strip_size - phys % dist.strip_size)
                lo = dist.physical_to_logical(dfile, phys)
                # ranges may overlap (several calls reading the same bytes): check every range
                # that starts before this piece ends (at most MAX_CALLID_MAP of them)
                for off, length, idx in ranges[:bisect.bisect_left(starts, lo + k)]:
                    if off + length > lo and idx < len(ids):
                        found.add(idx)
                phys, n = phys + k, n - k
        if not found or len(found) == len(ids):
            return hints
        return {**hints, "callid": [ids[i] for i in sorted(found)]}

    return hints_for
