"""The per-rank columnar event log: one row per traced MPI call and per client->server exchange."""

from __future__ import annotations

import os
from collections.abc import Sequence

from pipeline import schema as S
from pipeline.logwriter import DEFAULT_FLUSH_ROWS, PartLog, file_metadata

__all__ = ["ClientTrace"]


class ClientTrace:
    """Appends rows of ``pipeline.schema.CLIENT_SCHEMA`` for one rank, flushed in batches."""

    def __init__(self, directory: str | os.PathLike[str], rank: int, layout: str, run_id: str,
                 config_json: str = "{}", clock: str = "host0",
                 flush_rows: int = DEFAULT_FLUSH_ROWS, enabled: bool = True) -> None:
        self.rank = rank
        self.enabled = enabled
        self.clock = clock
        self.sentinel = S.sentinel(layout)
        meta = file_metadata(S.KIND_CLIENT, layout, run_id, config_json)
        self.log = PartLog(S.CLIENT_SCHEMA, directory, f"client-rank{rank:06d}", meta, flush_rows)

    def call(self, callid: int, func: str, file: str | None, fid: int | None,
             offset: int | None, size: int | None, count: int | None, datatype: str | None,
             nbytes: int | None, collective: bool, coll_seq: int | None, rid: int | None,
             t_start: int, t_end: int, error: str | None, kind: str = "call") -> None:
        """Log one MPI call (``kind='wait'``: the completion of a non-blocking call, same rid)."""
        if not self.enabled:
            return
        self.log.append((callid, self.rank, self.clock, kind, func, file, fid, offset, size, count,
                         datatype, nbytes, collective, coll_seq, rid, t_start, t_end, error,
                         None, None, None, None, None))

    def rpc(self, callids: Sequence[int], func: str, server: str, op: str, seq: int,
            t_start: int, t_end: int, t_recv: int | None, t_send: int | None,
            error: str | None) -> None:
        """Log one client->server exchange made on behalf of ``callids``."""
        if not self.enabled:
            return
        callid = callids[0] if len(callids) == 1 else self.sentinel
        self.log.append((callid, self.rank, self.clock, "rpc", func, None, None, None, None, None,
                         None, None, None, None, None, t_start, t_end, error,
                         server, op, seq, t_recv, t_send))

    def close(self) -> None:
        self.log.close()
