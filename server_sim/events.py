"""The per-server columnar event log (request, flow, Trove and metadata events).

Every row is checked against the log's schema when it is appended (``validate.row_check``):
a row that would not fit fails the request that made it, never the batch it would have joined
(the other clients' events, written at the next flush).
"""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple

from callid_core import schema as S
from callid_core.choices import SERVER_LAYERS
from callid_core.clock import now
from callid_core.config import Config
from callid_core.ids import Layout
from callid_core.partlog import PartLog
from server_sim.attribution import Share
from server_sim.validate import row_check

__all__ = ["ServerEvents", "Who", "now"]

_row = S.SERVER.row
_check = row_check(S.SERVER)


class Who(NamedTuple):
    """Who asked for a request: the columns every event of the request carries."""

    callid: int  # its one CallID, or the layout's sentinel (none, or several)
    callids: list[int]  # every CallID it serves
    rank: int
    req_id: int


class ServerEvents:
    """Appends server events as rows of the server log (``callid_core.schema.SERVER``)."""

    def __init__(self, config: Config, server: str) -> None:
        self.server = server
        self.clock = server
        self.sentinel = Layout.parse(config.callid_layout).sentinel
        meta = S.file_metadata(S.KIND_SERVER, config.callid_layout, config.run_id, config.to_json())
        self.log = PartLog(S.SERVER_SCHEMA, config.trace_dir, S.server_log_stem(server), meta,
                           config.flush_rows)
        self._ids = itertools.count(1)
        self.enabled = config.server_events
        #: the layers logged (the event mask: :meth:`set_layers`)
        self.layers = frozenset(config.server_layers)

    def new_id(self) -> int:
        """Reserve an event id (so children can name their parent before it ends)."""
        return next(self._ids)

    def who(self, hints: dict[str, Any]) -> Who:
        """Who asked, from a request's hints (decoded once per request)."""
        callids = hints.get("callid") or []
        return Who(self.single(callids), callids, hints.get("rank", -1), hints.get("request_id", -1))

    def single(self, callids: list[int]) -> int:
        """The ``callid`` column of an event serving ``callids``: the one, or the sentinel."""
        return callids[0] if len(callids) == 1 else self.sentinel

    def record(
        self, *, event_id: int, layer: str, op: str, who: Who, parent: int, handle: int,
        offset: int, size: int, t_start: int, t_end: int, share: Share | None = None,
        file_range: tuple[int, int] = (-1, -1), always: bool = False,
    ) -> None:
        """Log one finished event of ``who``'s request, if its layer is logged (or ``always``); ``share``:
        the part of the request's CallIDs the event serves (an aggregated request's disk operation; None:
        all), their shares and own bytes, its holes (default: all of ``size`` each when the event serves
        one CallID, none of an event of size 0, else unknown); ``file_range``: a data operation's range in
        the file.
        :class:`~server_sim.validate.Invalid` (nothing logged) if the row does not fit the log's schema."""
        if not self.enabled or (layer not in self.layers and not always):
            return
        callid, callids, rank, req_id = who
        if share is None:  # (an event moving nothing moves nothing of any call)
            each = [size] if len(callids) == 1 else [] if size else [0] * len(callids)
            share = Share(None, each, each, 0)
        elif share.callids is not None:
            callids = share.callids
            callid = self.single(callids)
        row = _row(server=self.server, clock=self.clock, layer=layer, op=op, callid=callid,
                   callids=callids, callid_bytes=share.shares, callid_own=share.own, holes=share.holes,
                   rank=rank, req_id=req_id,
                   event_id=event_id, parent=parent, handle=handle, offset=offset,
                   file_offset=file_range[0], file_end=file_range[1], size=size,
                   t_start=t_start, t_end=t_end)
        _check(row)
        self.log.append(row)

    def set_layers(self, layers: frozenset[str], who: Who, t: int) -> None:
        """Log only ``layers`` from now on (the event mask).  The change is logged whatever the mask: an
        event of layer ``log`` (the log's own), op ``event_mask``, whose ``offset`` has bit i set for each
        layer ``SERVER_LAYERS[i]`` logged from ``t`` on."""
        bits = sum(1 << i for i, layer in enumerate(SERVER_LAYERS) if layer in layers)
        self.record(event_id=self.new_id(), layer="log", op="event_mask", who=who, parent=-1, handle=0,
                    offset=bits, size=0, t_start=t, t_end=t, always=True)
        self.layers = layers

    def close(self) -> None:
        self.log.close()
