"""Which calls each disk operation of a request serves, and how many of its bytes are each call's.

A request serving one CallID: every byte of its operations is that call's.  A request
serving several (an aggregator's) carries the ``callid_bytes`` hint: for each of its Trove
operations in order (one per flow buffer; the one of a small I/O), the calls owning bytes
of it and how many (``protocol.encode_callid_bytes``).  The lookup is exact whatever the
number of file ranges the calls own: operation k serves exactly the calls of entry k.

Each call's owned bytes of the operation are logged as its own (``callid_own``: what it read or
wrote through the operation), and the operation's bytes are apportioned to those calls in
proportion to them (:func:`apportion`, ``callid_bytes``): when the owners' bytes tile the
operation, each call's share is its own bytes; bytes no call owns (the holes a read-modify-write
reads and writes back) are split among the operation's owners, and counted as the operation's
``holes``; bytes several calls own (calls reading the same bytes) are shared among them, so the
operation's bytes are counted once.  An operation holding no call's bytes is shared equally by
every call of the request.  A request of one CallID may carry the hint too (its call's bytes do
not fill its extent: data sieving's): its operations are all the call's, their holes said.

A request serving several CallIDs without a valid ``callid_bytes`` (a replayed request, an
old client) is attributed at request level: every operation serves every CallID, bytes
unknown (an empty ``callid_bytes`` column; the merged arrows say ``exact = false``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import NamedTuple

from server_sim import protocol as P

log = logging.getLogger("server_sim.attribution")

class Share(NamedTuple):
    """What one disk operation serves."""

    #: the CallIDs (None: all of the request's)
    callids: list[int] | None
    #: each one's apportioned share of the operation's bytes, aligned with them (empty: not known per call)
    shares: list[int]
    #: each one's own bytes of the operation (its data in it), aligned with them (empty: not known)
    own: list[int]
    #: the operation's bytes no call owns (0: none, or not known)
    holes: int


def apportion(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` in integers that add up to ``total``
    (largest remainder, ties to the earlier weight); equal shares when every weight is 0.
    When the weights add up to ``total`` they are the split."""
    wsum = sum(weights)
    if wsum == total:
        return list(weights)
    if wsum == 0:
        weights, wsum = [1] * len(weights), len(weights)
    parts = [total * w // wsum for w in weights]
    left = total - sum(parts)
    if left:
        order = sorted(range(len(weights)), key=lambda i: (-(total * weights[i] % wsum), i))
        for i in order[:left]:
            parts[i] += 1
    return parts


class Attribution:
    """The attribution of one request's disk operations (see the module's doc).

    :meth:`expect` states how many Trove operations the request makes (its flow buffers);
    :meth:`share` attributes operation k; :attr:`totals` are the shares per CallID of the
    request so far, :attr:`own_totals` their own bytes, aligned with its CallIDs (None: not known
    per call)."""

    __slots__ = ("callids", "entries", "totals", "own_totals")

    def __init__(self, callids: list[int], hint: list[int] | None) -> None:
        self.callids = callids
        self.entries: list[P.Owned] | None = None
        self.totals: list[int] | None = [0] * len(callids)
        self.own_totals: list[int] | None = [0] * len(callids)
        if hint and callids:
            try:
                self.entries = P.decode_callid_bytes(hint, len(callids))
            except P.ProtocolError as exc:
                log.warning("request-level attribution: %s", exc)
        if self.entries is None and len(callids) > 1:
            self.totals = self.own_totals = None

    def expect(self, n_ops: int) -> None:
        """The request makes ``n_ops`` Trove operations: a ``callid_bytes`` that does not say
        whose bytes each is (another flow buffer size) leaves them attributed at request level."""
        if self.entries is not None and len(self.entries) != n_ops:
            log.warning("request-level attribution: callid_bytes describes %d operations, the request "
                        "makes %d", len(self.entries), n_ops)
            self.entries = self.totals = self.own_totals = None

    def share(self, k: int, size: int) -> Share:
        """What Trove operation ``k`` (of ``size`` bytes) serves."""
        totals, own_totals = self.totals, self.own_totals
        entries = self.entries[k] if self.entries is not None else None
        owned = sum(n for _, n in entries) if entries is not None else size
        holes = max(0, size - owned)
        if not self.callids:
            return Share(None, [], [], holes)
        if len(self.callids) == 1:
            own = min(owned, size)
            if totals and own_totals:
                totals[0] += size
                own_totals[0] += own
            return Share(None, [size], [own], holes)
        if entries is None or totals is None or own_totals is None:
            return Share(None, [], [], 0)
        if not entries:  # nobody's bytes: every call of the request, equally
            entries = tuple((i, 0) for i in range(len(self.callids)))
        own = [min(n, size) for _, n in entries]  # (no call owns more than the operation moved)
        shares = apportion(size, own)
        for (i, _), share, n in zip(entries, shares, own):
            totals[i] += share
            own_totals[i] += n
        return Share([self.callids[i] for i, _ in entries], shares, own, holes)
