"""The per-rank columnar event log: one row per traced MPI call, phase of a collective call and
client->server exchange."""

from __future__ import annotations

import os
from collections.abc import Sequence

from callid_core import schema as S
from callid_core.config import DEFAULT_FLUSH_ROWS
from callid_core.ids import Layout
from callid_core.partlog import PartLog

__all__ = ["ClientTrace"]

_row_of = S.CLIENT.row_of
_row = S.CLIENT.row


class ClientTrace:
    """Appends rows of the client log (``callid_core.schema.CLIENT``) for one rank, flushed in batches."""

    def __init__(self, directory: str | os.PathLike[str], rank: int, layout: str, run_id: str,
                 config_json: str = "{}", clock: str = "host0",
                 flush_rows: int = DEFAULT_FLUSH_ROWS, enabled: bool = True, name: str | None = None) -> None:
        """``name``: the log's part files' prefix (default ``client-rankNNNNNN``)."""
        self.rank = rank
        self.enabled = enabled
        self.clock = clock
        self.sentinel = Layout.parse(layout).sentinel
        meta = S.file_metadata(S.KIND_CLIENT, layout, run_id, config_json)
        self.log = PartLog(S.CLIENT_SCHEMA, directory, name or f"client-rank{rank:06d}", meta, flush_rows)

    def call(self, record) -> None:
        """Log one MPI call (``kind='wait'``: the completion of a non-blocking call, same rid).

        ``record`` has the client log's columns as attributes (``callid.mpiio.record.Record``);
        this rank's ``rank`` and ``clock`` are filled in here.
        """
        if self.enabled:
            record.rank, record.clock = self.rank, self.clock
            self.log.append(_row_of(record))

    def rpc(self, callids: Sequence[int], func: str, server: str, op: str, seq: int,
            t_start: int, t_end: int, t_recv: int | None, t_send: int | None,
            error: str | None) -> None:
        """Log one client->server exchange made on behalf of ``callids``."""
        if self.enabled:
            self.log.append(_row(
                callid=callids[0] if len(callids) == 1 else self.sentinel, rank=self.rank, clock=self.clock,
                kind="rpc", func=func, server=server, op=op, req_seq=seq, t_start=t_start, t_end=t_end,
                t_recv=t_recv, t_send=t_send, error=error, callids=callids))

    def phase(self, callid: int, func: str, phase: str, t_start: int, t_end: int, *,
              offset: int | None = None, size: int | None = None, nbytes: int | None = None,
              error: str | None = None) -> None:
        """Log one phase of a collective call on this rank (``kind='phase'``, the phase in ``op``)."""
        if self.enabled:
            self.log.append(_row(
                callid=callid, rank=self.rank, clock=self.clock, kind="phase", func=func, op=phase,
                offset=offset, size=size, bytes=nbytes, collective=True, t_start=t_start, t_end=t_end,
                error=error))

    def close(self) -> None:
        self.log.close()
