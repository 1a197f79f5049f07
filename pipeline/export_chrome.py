"""Chrome trace-event JSON (opens in https://ui.perfetto.dev and chrome://tracing), written as a stream.

* **Tracks** (:mod:`pipeline.tracks`): process ``MPI ranks`` (pid 1) with thread ``rank r`` (tid
  ``r + 1``) per rank, a process per server with a thread per layer; events that overlap in time on
  one rank or layer go to extra threads (lanes, ``trove #2``), so the complete (``X``) events of a
  thread never partially overlap (Perfetto drops such events).  Lanes rather than async events:
  flow events bind to thread slices only.
* **Slices**: every call and server event is an ``X`` event (``ts``, ``dur`` in µs with ns
  digits, from the earliest slice of the selection) whose ``args`` carry its CallID (``callid``; a
  server event serving several calls: ``callids``).
* **Arrows**: v1 flow events, one id per arrow: ``s`` on the source track at ``s_ts`` and ``f`` with
  ``"bp": "e"`` on the operation's track at ``f_ts`` (see :mod:`pipeline.export`): each inside its
  slice, so each binds to the slice enclosing it (Perfetto binds a flow event to the slice open on its
  thread; it sorts events by time, complete events before flow events at equal times), and the start
  is no later than the end (an end sorted before its start is dropped).
* No ``displayTimeUnit``: Perfetto reads it as the unit of ``ts``.

The JSON text is made by DuckDB, a batch at a time, and written as the bytes of the Arrow string
column: no event is a Python object.
"""

from __future__ import annotations

import json
from typing import BinaryIO

import numpy as np
import pyarrow as pa

from pipeline.trace_stream import Progress, Source, columns
from pipeline.tracks import Thread

__all__ = ["write_chrome"]

#: flow events' category and name (a v1 flow is identified by its id, category and name)
FLOW_CAT, FLOW_NAME = "callid", "arrow"

_CALL_SQL = """
SELECT ',\n{"ph":"X","cat":"mpi","name":' || to_json(func) || ',"pid":1,"tid":' || tid
       || ',"ts":' || x_us(t_start) || ',"dur":' || x_dur(t_end - t_start) || ',"args":'
       || CASE WHEN callid_hex IS NULL AND file IS NULL THEN '{}' ELSE json_object(
              'callid', callid_hex, 'file', file, 'offset', file_offset, 'size', size, 'bytes', bytes,
              'error', error)::VARCHAR END || '}'
       || coalesce(array_to_string(list_transform(range(len(flow_ids)), lambda i:
              ',\n{"ph":"s","cat":"FLOW_CAT","name":"FLOW_NAME","id":' || flow_ids[i + 1]
              || ',"pid":1,"tid":' || tid || ',"ts":' || x_us(flow_ts[i + 1]) || '}'), ''), '') AS j
FROM x_batch"""

_OP_SQL = """
SELECT ',\n{"ph":"X","cat":' || to_json(layer) || ',"name":' || to_json(op) || ',"pid":' || pid
       || ',"tid":' || tid || ',"ts":' || x_us(t_start) || ',"dur":' || x_dur(t_end - t_start) || ',"args":'
       || CASE WHEN callids IS NULL THEN json_object('callid', callid_hex, 'rank', rank, 'req_id', req_id,
                   'event_id', event_id, 'handle', handle::VARCHAR, 'disk_offset', disk_offset,
                   'file_offset', file_offset, 'size', size)
               ELSE json_object('callids', callids, 'rank', rank, 'req_id', req_id,
                   'event_id', event_id, 'handle', handle::VARCHAR, 'disk_offset', disk_offset,
                   'file_offset', file_offset, 'size', size) END::VARCHAR || '}'
       || coalesce(array_to_string(list_transform(range(len(flow_ids)), lambda i:
              ',\n{"ph":"f","bp":"e","cat":"FLOW_CAT","name":"FLOW_NAME","id":' || flow_ids[i + 1]
              || ',"pid":' || pid || ',"tid":' || tid || ',"ts":' || x_us(flow_ts[i + 1]) || '}'), ''), '')
       AS j
FROM x_batch"""
_CALL_SQL, _OP_SQL = (q.replace("FLOW_CAT", FLOW_CAT).replace("FLOW_NAME", FLOW_NAME)
                      for q in (_CALL_SQL, _OP_SQL))


def write_chrome(src: Source, fh: BinaryIO, on_progress: Progress | None = None) -> dict:
    """Write the trace-event JSON of ``src`` to ``fh``; return ``flows_written``."""
    cur = src.con.cursor()  # (its own connection: the streams of src.con stay open)
    try:
        cur.execute(f"""
            CREATE TEMP MACRO x_dur(d) AS (d // 1000)::VARCHAR || '.' || lpad((d % 1000)::VARCHAR, 3, '0');
            CREATE TEMP MACRO x_us(t) AS x_dur(t - {src.t0}::BIGINT)""")
        out = _Out(fh, src, cur, on_progress)
        for batch in src.calls():
            tids = src.layout.rank_threads(*columns(batch, "rank", "t_start", "t_end"))
            out.slices(batch, tids, _CALL_SQL)
        for batch in src.ops():
            tids = src.layout.op_threads(*columns(batch, "track", "t_start", "t_end"))
            out.slices(batch, tids, _OP_SQL)
        other = {"tool": "callid", "layout": src.run.get("layout"), "run_id": src.run.get("client.run_id"),
                 "selection": src.sel.describe(), "t0_ns": src.t0,
                 "time_origin": "ts 0 is t0_ns on callid's reference clock"}
        out.close(other)
    finally:
        cur.close()
    return {"flows_written": src.n_arrows}


class _Out:
    """The JSON being written: events, and the process and thread names as threads are made."""

    def __init__(self, fh: BinaryIO, src: Source, cur, on_progress: Progress | None) -> None:
        self.fh, self.src, self.cur, self.on_progress = fh, src, cur, on_progress
        self.done = 0
        self.started = False
        self.pids: set[int] = set()
        self.process_names = dict(src.layout.processes())
        if on_progress:
            on_progress(0, src.total)

    def emit(self, data) -> None:
        """Write events, each preceded by ',\\n' (but the first)."""
        if not self.started:
            self.fh.write(b'{"traceEvents":[\n')
            data, self.started = memoryview(data)[2:], True
        self.fh.write(data)

    def close(self, other: dict) -> None:
        if not self.started:
            self.fh.write(b'{"traceEvents":[')
        self.fh.write(b'\n],\n"otherData":' + _json(other) + b"}\n")

    def slices(self, batch: pa.Table, tids: np.ndarray, sql: str) -> None:
        self.threads(self.src.layout.take_new())
        table = batch.append_column("tid", pa.array(tids, pa.int64()))
        self.cur.register("x_batch", table)
        try:
            text = self.cur.sql(sql).to_arrow_table().column(0)
        finally:
            self.cur.unregister("x_batch")
        for chunk in text.chunks:
            self.emit(_strings(chunk))
        self.done += batch.num_rows
        if self.on_progress:
            self.on_progress(self.done, self.src.total)

    def threads(self, threads: list[Thread]) -> None:
        """Name the threads made, and their processes the first time (with a thread's tid: a metadata
        event makes its thread too)."""
        events = []
        for t in threads:
            if t.pid not in self.pids:
                self.pids.add(t.pid)
                events += [_meta("process_name", t.pid, t.tid, name=self.process_names[t.pid]),
                           _meta("process_sort_index", t.pid, t.tid, sort_index=t.pid)]
            events += [_meta("thread_name", t.pid, t.tid, name=t.name),
                       _meta("thread_sort_index", t.pid, t.tid, sort_index=t.sort)]
        if events:
            self.emit(b"".join(b",\n" + _json(e) for e in events))


def _meta(what: str, pid: int, tid: int, **args) -> dict:
    return {"ph": "M", "name": what, "pid": pid, "tid": tid, "args": args}


def _json(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _strings(arr: pa.Array) -> memoryview:
    """The strings of an Arrow string array back to back: its data buffer."""
    if arr.null_count:
        raise ValueError("null event text")
    if pa.types.is_large_string(arr.type):
        width = np.int64
    elif pa.types.is_string(arr.type):
        width = np.int32
    else:
        arr, width = arr.cast(pa.large_string()), np.int64
    _, offsets, data = arr.buffers()
    off = np.frombuffer(offsets, width)[arr.offset:arr.offset + len(arr) + 1]
    return memoryview(data)[int(off[0]):int(off[-1])]
