"""Export a merged database as Chrome trace-event JSON (opens in Perfetto and chrome://tracing).

Tracks: one process "MPI ranks" with a thread per rank, and one process per
server with a thread per layer (req, flow, trove, meta).  MPI calls and server
operations are complete (``X``) slices carrying the CallID in their args.

Arrows (call -> disk operation):

* fan-out: the call slice carries ``bind_id`` (hex string) with ``flow_out``; each
  disk operation that serves only that call carries the same ``bind_id`` with
  ``flow_in`` (a slice can carry one ``bind_id``);
* fan-in (a disk operation serving several calls): v1 flow events, an ``s`` inside
  the call slice and an ``f`` with ``"bp": "e"`` inside the disk operation, one
  fresh id per arrow.

Flow ids are never reused, and every flow end lies inside a slice of its track.
"""

from __future__ import annotations

import json

from callid_core import schema as S
from callid_core.atomic import replacing
from pipeline.query import connect

RANKS_PID = 1
LAYER_TIDS = {"req": 1, "flow": 2, "trove": 3, "meta": 4}


def chrome_trace(db: str) -> dict:
    """The trace as a JSON-ready dict (``traceEvents`` plus metadata)."""
    con = connect(db)
    try:
        t0 = con.execute("SELECT least((SELECT min(t_start) FROM calls), "
                         "(SELECT min(t_start) FROM server_ops))").fetchall()[0][0] or 0
        us = lambda t: (t - t0) / 1000.0  # noqa: E731
        servers = [s for (s,) in con.execute("SELECT DISTINCT server FROM server_ops ORDER BY 1").fetchall()]
        server_pid = {s: 10 + i for i, s in enumerate(servers)}
        events: list[dict] = [_meta("process_name", RANKS_PID, 0, "MPI ranks")]
        events += [_meta("process_name", pid, 0, f"server {s}") for s, pid in server_pid.items()]
        for pid in server_pid.values():
            events += [_meta("thread_name", pid, tid, layer) for layer, tid in LAYER_TIDS.items()]
        ranks = [r for (r,) in con.execute("SELECT DISTINCT rank FROM calls ORDER BY 1").fetchall()]
        events += [_meta("thread_name", RANKS_PID, r, f"rank {r}") for r in ranks]

        # flow ids: a call with single-call disk operations gets one v2 id (fan-out)
        fanout_ids = dict(con.execute(f"""
            SELECT callid, row_number() OVER (ORDER BY callid) FROM (
                SELECT DISTINCT callid FROM arrows WHERE n_callids = 1 AND layer IN ({S.DISK_LAYERS_SQL}))
        """).fetchall())
        for callid, hexid, rank, func, file, off, size, nbytes, ts, te in con.execute("""
                SELECT callid, callid_hex, rank, func, file, file_offset, size, bytes, t_start, t_end
                FROM calls ORDER BY t_start""").fetchall():
            ev = _slice(func, "mpi", RANKS_PID, rank, us(ts), us(te),
                        {"callid": hexid, "file": file, "file_offset": off, "size": size, "bytes": nbytes})
            if callid in fanout_ids:
                ev.update(bind_id=f"0x{fanout_ids[callid]:x}", flow_out=True)
            events.append(ev)
        for server, layer, op, callids, hexid, handle, off, size, ts, te, eid in con.execute("""
                SELECT server, layer, op, callids, callid_hex, handle, disk_offset, size, t_start, t_end,
                       event_id FROM server_ops ORDER BY t_start""").fetchall():
            ev = _slice(op, layer, server_pid[server], LAYER_TIDS.get(layer, 9), us(ts), us(te),
                        {"callid": hexid, "callids": len(callids), "handle": handle, "disk_offset": off,
                         "size": size, "event_id": eid})
            if layer in S.DISK_LAYERS and len(callids) == 1 and callids[0] in fanout_ids:
                ev.update(bind_id=f"0x{fanout_ids[callids[0]]:x}", flow_in=True)
            events.append(ev)

        # fan-in arrows: v1 flow events, one fresh id each, ids after the v2 ones
        next_id = len(fanout_ids) + 1
        for rank, cts, cte, server, layer, ts, te in con.execute(f"""
                SELECT rank, call_t_start, call_t_end, server, layer, t_start, t_end FROM arrows
                WHERE n_callids > 1 AND layer IN ({S.DISK_LAYERS_SQL}) ORDER BY t_start, rank""").fetchall():
            flow = {"name": "arrow", "cat": "callid", "id": next_id}
            events.append({**flow, "ph": "s", "pid": RANKS_PID, "tid": rank, "ts": _mid(us(cts), us(cte))})
            events.append({**flow, "ph": "f", "bp": "e", "pid": server_pid[server],
                           "tid": LAYER_TIDS.get(layer, 9), "ts": _mid(us(ts), us(te))})
            next_id += 1
        run = dict(con.execute("SELECT key, value FROM run WHERE key IN ('layout', 'client.run_id')")
                   .fetchall())
    finally:
        con.close()
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "metadata": {"tool": "callid", "layout": run.get("layout"), "run_id": run.get("client.run_id")}}


def _meta(name: str, pid: int, tid: int, value: str) -> dict:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": {"name": value}}


def _slice(name: str, cat: str, pid: int, tid: int, ts: float, te: float, args: dict) -> dict:
    return {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid, "ts": ts,
            "dur": max(te - ts, 0.001), "args": args}


def _mid(ts: float, te: float) -> float:
    """A time strictly inside a slice (flow ends bind to the enclosing slice)."""
    return ts + max(te - ts, 0.001) / 2


def write_chrome_trace(db: str, out: str) -> int:
    """Write the trace to ``out`` (temporary name, then rename); return the number of events."""
    trace = chrome_trace(db)
    with replacing(out) as tmp, open(tmp, "w") as fh:
        json.dump(trace, fh, separators=(",", ":"), default=str)
    return len(trace["traceEvents"])
