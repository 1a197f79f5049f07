"""The per-server columnar event log (request, flow, Trove and metadata events)."""

from __future__ import annotations

import itertools

from pipeline import schema as S
from pipeline.logwriter import PartLog, file_metadata
from server_sim.clock import now
from server_sim.config import Config

__all__ = ["ServerEvents", "Who", "now"]

Who = tuple[int, list[int], int, int]  # callid, callids, rank, request_id


class ServerEvents:
    """Appends server events as rows of ``pipeline.schema.SERVER_SCHEMA``."""

    def __init__(self, config: Config, server: str) -> None:
        self.server = server
        self.clock = server
        self.sentinel = S.sentinel(config.callid_layout)
        meta = file_metadata(S.KIND_SERVER, config.callid_layout, config.run_id, config.to_json())
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
            self.log.append((self.server, self.clock, layer, op, *who, event_id, parent, handle, offset, size,
                             t_start, t_end))

    def close(self) -> None:
        self.log.close()
