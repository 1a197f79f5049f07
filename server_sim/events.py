"""The per-server columnar event log (request, flow, Trove and metadata events)."""

from __future__ import annotations

import itertools

from callid_core import schema as S
from callid_core.clock import now
from callid_core.config import Config
from callid_core.ids import Layout
from callid_core.partlog import PartLog

__all__ = ["ServerEvents", "Who", "now"]

Who = tuple[int, list[int], int, int]  # callid, callids, rank, request_id
_row = S.SERVER.row


class ServerEvents:
    """Appends server events as rows of the server log (``callid_core.schema.SERVER``)."""

    def __init__(self, config: Config, server: str) -> None:
        self.server = server
        self.clock = server
        self.sentinel = Layout.parse(config.callid_layout).sentinel
        meta = S.file_metadata(S.KIND_SERVER, config.callid_layout, config.run_id, config.to_json())
        self.log = PartLog(S.SERVER_SCHEMA, config.trace_dir, f"server-{server}", meta, config.flush_rows)
        self._ids = itertools.count(1)
        self.enabled = config.server_events

    def new_id(self) -> int:
        """Reserve an event id (so children can name their parent before it ends)."""
        return next(self._ids)

    def who(self, hints: dict) -> Who:
        """The columns a request's hints give its events: CallID, CallIDs, rank, request id."""
        callids = hints.get("callid") or []
        return (callids[0] if len(callids) == 1 else self.sentinel, callids, hints.get("rank", -1),
                hints.get("request_id", -1))

    def record(
        self, event_id: int, layer: str, op: str, who: Who, parent: int, handle: int,
        offset: int, size: int, t_start: int, t_end: int,
    ) -> None:
        """Log one finished event of the request ``who`` (:meth:`who`) describes."""
        if self.enabled:
            callid, callids, rank, req_id = who
            self.log.append(_row(server=self.server, clock=self.clock, layer=layer, op=op, callid=callid,
                                 callids=callids, rank=rank, req_id=req_id, event_id=event_id,
                                 parent=parent, handle=handle, offset=offset, size=size,
                                 t_start=t_start, t_end=t_end))

    def close(self) -> None:
        self.log.close()
