"""Which calls each disk operation of a request serves, and how many of its bytes are each call's.

A request serving one CallID: every byte of its operations is that call's.  A request
serving several (an aggregator's) carries the ``callid_bytes`` hint: for each of its Trove
operations in order (one per flow buffer; the one of a small I/O), the calls owning bytes
of it and how many (``protocol.encode_callid_bytes``).  The lookup is exact whatever the
number of file ranges the calls own: operation k serves exactly the calls of entry k.

The operation's bytes are apportioned to those calls in proportion to their owned bytes
(:func:`apportion`): when the owners' bytes tile the operation, each call gets its own
bytes; bytes no call owns (the holes a read-modify-write reads and writes back) are split
among the operation's owners, and counted as the operation's ``holes``; bytes several calls
own (calls reading the same bytes) are shared among them, so the operation's bytes are
counted once.  An operation holding no call's bytes is shared equally by every call of the
request.  A request of one CallID may carry the hint too (its call's bytes do not fill its
extent: data sieving's): its operations are all the call's, their holes said.

A request serving several CallIDs without a valid ``callid_bytes`` (a replayed request, an
old client) is attributed at request level: every operation serves every CallID, bytes
unknown (an empty ``callid_bytes`` column; the merged arrows say ``exact = false``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from server_sim import protocol as P

log = logging.getLogger("server_sim.attribution")

#: What one disk operation serves: the CallIDs (None: all of the request's), each one's bytes,
#: aligned with them (empty: not known per call), and its bytes no call owns (0: none, or not known)
Share = tuple[list[int] | None, list[int], int]


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
    :meth:`share` attributes operation k; :attr:`totals` are the bytes per CallID of the
    request so far, aligned with its CallIDs (None: not known per call)."""

    __slots__ = ("callids", "entries", "totals")

    def __init__(self, callids: list[int], hint: list[int] | None) -> None:
        self.callids = callids
        self.entries: list[P.Owned] | None = None
        self.totals: list[int] | None = [0] * len(callids)
        if hint and callids:
            try:
                self.entries = P.decode_callid_bytes(hint, len(callids))
            except P.ProtocolError as exc:
                log.warning("request-level attribution: %s", exc)
        if self.entries is None and len(callids) > 1:
            self.totals = None

    def expect(self, n_ops: int) -> None:
        """The request makes ``n_ops`` Trove operations: a ``callid_bytes`` that does not say
        whose bytes each is (another flow buffer size) leaves them attributed at request level."""
        if self.entries is not None and len(self.entries) != n_ops:
            log.warning("request-level attribution: callid_bytes describes %d operations, the request "
                        "makes %d", len(self.entries), n_ops)
            self.entries = self.totals = None

    def share(self, k: int, size: int) -> Share:
        """The CallIDs Trove operation ``k`` (of ``size`` bytes) serves, each one's bytes, its holes."""
        totals = self.totals
        entries = self.entries[k] if self.entries is not None else None
        holes = max(0, size - sum(n for _, n in entries)) if entries is not None else 0
        if len(self.callids) < 2:
            if totals:
                totals[0] += size
            return None, [size] if self.callids else [], holes
        if entries is None:
            return None, [], 0
        if not entries:  # nobody's bytes: every call of the request, equally
            entries = tuple((i, 0) for i in range(len(self.callids)))
        nbytes = apportion(size, [n for _, n in entries])
        for (i, _), n in zip(entries, nbytes):
            totals[i] += n
        return [self.callids[i] for i, _ in entries], nbytes, holes
