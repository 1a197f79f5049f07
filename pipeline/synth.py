"""``callid synth``: synthetic client and server logs with known arrows and clocks (the ground truth).

Each rank makes ``calls / ranks`` sequential calls.  A call sends one request to
each server its disk operations are on: the client logs an rpc row (send and
receive on its host's clock, the server's receive and send on the server's
clock, one-way network latencies ``latency + Exp(jitter)``), the server logs a
``req`` event and ``fanout`` Trove operations in all, inside the request (a share
of writes are write-back: they end after the response, and after the call).  A
share of the calls are collective: one call per rank with the same ``coll_seq``,
whose requests one aggregator sends, carrying every rank's CallID (fan-in).  Some
server operations carry no CallID (unattributed), some calls are not stamped (the
all-ones sentinel), and ``misjoined`` requests carry the CallID of another call of
the same rank (as a tracing bug would).  Every host and server clock can be given
an offset, drift and drift wander (``callid_core.clock``); the truth is stored in the
file metadata (``clock_skew``, ``clock_t0``), as a real run stores it.
Generation is vectorized (numpy), so millions of events take seconds.

Writes ``client.parquet``, ``server.parquet`` (the schemas of a real run) and
``truth.parquet`` (callid, server, event_id: one row per arrow the logged CallIDs
imply; for mis-joined requests that is the logged, wrong, CallID).  An event's bytes are
all its CallID's, or split equally among its CallIDs (``callid_bytes``); the synthetic
operations have no place in a file (``file_offset`` -1).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa

from callid_core import schema as S
from callid_core.atomic import replacing
from callid_core.clock import parse_skew, skews_to_json
from callid_core.errors import BadValue
from callid_core.ids import DEFAULT_LAYOUT
from callid_core.partlog import LOG_ROW_GROUP, log_writer
from pipeline.synth_options import SynthOptions

LAYOUT = DEFAULT_LAYOUT
TRUTH_SCHEMA = pa.schema([("callid", pa.uint64()), ("server", pa.string()), ("event_id", pa.int64())])


T_BASE = 1_800_000_000 * 10**9  # ns: where synthetic time starts (an epoch time, as real logs have)


class SynthError(BadValue):
    """Options that cannot make a trace (the message says which)."""


CHUNK_CALLS = 1 << 20  # calls generated (and held in memory) at a time


@dataclass
class _Carry:
    """What one chunk of calls hands to the next: per-rank time, per-server event ids, requests."""

    t_next: np.ndarray  # per rank: where its next call may start
    events: np.ndarray  # per server: event ids used so far
    requests: int = 0


def synthesize(opts: SynthOptions, out: str | Path, chunk_calls: int = CHUNK_CALLS,
               on_chunk: Callable[[int, int], None] | None = None) -> dict:
    """Write the three files into ``out``; return their row counts.

    Calls are generated ``chunk_calls`` at a time (the same slice of every rank's calls),
    so memory stays bounded however large the trace; ``on_chunk(done, total)`` reports
    progress in calls per rank.
    """
    if opts.ranks > opts.calls:
        raise SynthError(f"--ranks {opts.ranks} is more than --calls {opts.calls}: every rank makes a call")
    if opts.ranks - 1 > LAYOUT.max_rank:
        raise SynthError(f"--ranks {opts.ranks}: CallIDs (layout {LAYOUT}) hold ranks up to "
                         f"{LAYOUT.max_rank}")
    per_rank = max(1, opts.calls // opts.ranks)
    hosts = -(-opts.ranks // opts.ranks_per_host) if opts.ranks_per_host else 1
    names = np.array([f"io{s}" for s in range(opts.servers)])
    skews = parse_skew(opts.skew, list(names), list(names), hosts)
    if opts.duration and opts.duration <= per_rank * 400_000:  # (a call lasts at most ~0.4 ms)
        raise SynthError(f"--duration {opts.duration / 1e9:g} s is too short for {per_rank} calls per rank")
    # drift wander: one period over the trace (or the default hour)
    clock_of = {name: replace(sk, period_ns=opts.duration or sk.period_ns) for name, sk in skews.items()}
    meta_args = (str(LAYOUT), f"synth-{opts.seed}",
                 json.dumps({"synth": asdict(opts), "clock_skew": skews_to_json(clock_of), "clock_t0": T_BASE,
                             "ranks_per_host": opts.ranks_per_host}))
    rng = np.random.default_rng(opts.seed)
    step = max(1, chunk_calls // opts.ranks)
    carry = _Carry(np.full(opts.ranks, T_BASE, np.int64), np.zeros(opts.servers, np.int64))
    counts = dict.fromkeys(("calls", "rpcs", "server_ops", "arrows"), 0)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = (("client", S.CLIENT_SCHEMA, S.KIND_CLIENT), ("server", S.SERVER_SCHEMA, S.KIND_SERVER),
             ("truth", TRUTH_SCHEMA, None))
    with ExitStack() as stack:
        writers = []
        for name, schema, kind in files:
            meta = S.file_metadata(kind, *meta_args) if kind else {b"callid.kind": b"truth"}
            tmp = stack.enter_context(replacing(out / f"{name}.parquet"))
            writers.append(log_writer(tmp, schema.with_metadata(meta)))
        try:
            for k0 in range(0, per_rank, step):
                k1 = min(per_rank, k0 + step)
                misjoined = opts.misjoined * k1 // per_rank - opts.misjoined * k0 // per_rank
                tables, chunk_counts = _chunk(opts, rng, names, clock_of, k0, k1, per_rank, misjoined, carry)
                for writer, table, (_, schema, _) in zip(writers, tables, files, strict=True):
                    writer.write_table(table.cast(schema), row_group_size=LOG_ROW_GROUP)
                for key, value in chunk_counts.items():
                    counts[key] += value
                if on_chunk:
                    on_chunk(k1, per_rank)
        finally:
            for writer in writers:
                writer.close()
    return counts


@dataclass(frozen=True)
class _Calls:
    """One chunk's calls, rank-major: rank r makes calls r*per_rank ... in time order."""

    n: int
    per_rank: int
    rank: np.ndarray
    counter: np.ndarray  # the CallID's counter
    callid: np.ndarray
    collective_idx: np.ndarray  # per call index: collective (the same call index on every rank)
    collective: np.ndarray
    coll_seq: np.ndarray  # -1: not collective
    stamped: np.ndarray
    logged_id: np.ndarray  # the CallID logged (the sentinel when not stamped)
    write: np.ndarray
    size: np.ndarray


@dataclass(frozen=True)
class _DiskOps:
    """The disk operations of requests: independent calls own theirs; a collective group's are shared by
    all ranks and sent by one aggregator (rank g % ranks for the group of call g)."""

    call: np.ndarray  # the requesting call
    server: np.ndarray
    group_first: np.ndarray  # each collective group's call index


@dataclass(frozen=True)
class _Requests:
    """One request per (requesting call, server), and its steps' lengths (ns): the client sends it
    ``send_after`` its call's start, it travels ``lat_out``, the server serves it in ``service`` and
    its response travels ``lat_back``."""

    call: np.ndarray
    server: np.ndarray
    of_op: np.ndarray  # each disk operation's request
    send_after: np.ndarray
    lat_out: np.ndarray
    service: np.ndarray
    lat_back: np.ndarray


@dataclass(frozen=True)
class _CallTimes:
    """Each call's start, duration and end (ns, on the reference clock)."""

    start: np.ndarray
    duration: np.ndarray
    end: np.ndarray


@dataclass(frozen=True)
class _RequestTimes:
    """Each request's times on the reference clock: sent and back (client), received and answered (server)."""

    sent: np.ndarray
    received: np.ndarray
    answered: np.ndarray
    back: np.ndarray


@dataclass(frozen=True)
class _Unattributed:
    """The disk operations of no request: in some call's window (on any server: drawn with the events)."""

    call: np.ndarray
    start: np.ndarray
    end: np.ndarray


@dataclass(frozen=True)
class _Events:
    """The server events: the disk operations of requests, the unattributed ones, then one ``req``
    event per request; their CallIDs as lists (``lengths`` of each, from ``offsets`` in ``values``)."""

    server: np.ndarray
    event_id: np.ndarray
    req: np.ndarray  # each event's request (-1: none)
    lengths: np.ndarray
    offsets: np.ndarray
    values: np.ndarray


def _chunk(opts: SynthOptions, rng: np.random.Generator, names: np.ndarray, clock_of: dict, k0: int, k1: int,
           total_per_rank: int, misjoined: int, carry: _Carry) -> tuple[list[pa.Table], dict]:
    """Calls ``k0 .. k1`` of every rank: the client, server and truth tables, and their row counts."""
    calls = _calls(opts, rng, k0, k1)
    ops = _disk_ops(opts, rng, calls, k0)
    reqs = _requests(opts, rng, calls, ops)
    times = _call_times(opts, rng, calls, reqs, k1, total_per_rank, carry.t_next)
    carry.t_next = times.end.reshape(opts.ranks, calls.per_rank).max(axis=1)
    wire = _request_times(reqs, times.start)
    op_start, op_end = _op_times(opts, rng, calls, ops, reqs, wire)
    un = _unattributed(opts, rng, len(ops.call), times)
    req_ids = _request_ids(opts, calls, reqs, misjoined, k0)
    ev = _events(opts, rng, calls, ops, reqs, un, req_ids, carry)
    # clocks: every host's and server's times as that clock reads them
    host = calls.rank // opts.ranks_per_host if opts.ranks_per_host else np.zeros(calls.n, np.int32)
    client = _client_table(names, clock_of, calls, reqs, times, wire, host, carry.requests)
    starts = np.concatenate([op_start, un.start, wire.received])
    ends = np.concatenate([op_end, un.end, wire.answered - 100])
    srv = _server_table(names, clock_of, calls, ops, reqs, un, ev, starts, ends)
    truth = _truth_table(names, len(ops.call), ev)
    carry.requests += len(reqs.call)
    return [client, srv, truth], {"calls": calls.n, "rpcs": len(reqs.call), "server_ops": len(ev.server),
                                  "arrows": truth.num_rows}


def _calls(opts: SynthOptions, rng: np.random.Generator, k0: int, k1: int) -> _Calls:
    """Calls ``k0 .. k1`` of every rank: their CallIDs, which are collective, stamped, writes, and sizes."""
    per_rank = k1 - k0
    n = per_rank * opts.ranks
    rank = np.repeat(np.arange(opts.ranks, dtype=np.int32), per_rank)
    counter = np.tile(np.arange(k0 + 1, k1 + 1, dtype=np.uint64), opts.ranks)
    callid = (rank.astype(np.uint64) << np.uint64(LAYOUT.counter_bits)) | counter
    collective_idx = rng.random(per_rank) < opts.collective_share  # the same call index on every rank
    collective = np.tile(collective_idx, opts.ranks)
    coll_seq = np.where(collective, np.tile(np.arange(k0, k1), opts.ranks), -1)
    stamped = rng.random(n) >= opts.unstamped_share
    stamped[collective] = True
    logged_id = np.where(stamped, callid, np.uint64(LAYOUT.sentinel))
    write = rng.random(n) < 0.5
    size = rng.integers(1, 64, n) * 65536
    return _Calls(n=n, per_rank=per_rank, rank=rank, counter=counter, callid=callid,
                  collective_idx=collective_idx, collective=collective, coll_seq=coll_seq, stamped=stamped,
                  logged_id=logged_id, write=write, size=size)


def _disk_ops(opts: SynthOptions, rng: np.random.Generator, calls: _Calls, k0: int) -> _DiskOps:
    """``fanout`` disk operations per stamped independent call and per collective group, on random servers."""
    owner_call = np.repeat(np.nonzero(~calls.collective & calls.stamped)[0], opts.fanout)
    group_first = np.nonzero(calls.collective_idx)[0]
    aggregator_call = ((k0 + group_first) % opts.ranks) * calls.per_rank + group_first
    shared_group = np.repeat(group_first, opts.fanout)
    n_own, n_shared = len(owner_call), len(shared_group)
    op_call = np.concatenate([owner_call, np.repeat(aggregator_call, opts.fanout)])  # the requesting call
    op_server = rng.integers(0, opts.servers, n_own + n_shared)
    return _DiskOps(call=op_call, server=op_server, group_first=group_first)


def _requests(opts: SynthOptions, rng: np.random.Generator, calls: _Calls, ops: _DiskOps) -> _Requests:
    """The requests of the disk operations, one per (requesting call, server), with random steps."""
    nsrv = opts.servers
    req_key, op_req = np.unique(ops.call.astype(np.int64) * nsrv + ops.server, return_inverse=True)
    req_call, req_server = req_key // nsrv, req_key % nsrv
    m_req = len(req_key)
    send_after = rng.integers(500, 5_000, m_req)
    lat_out = opts.latency + rng.exponential(opts.jitter, m_req)
    service = rng.integers(20_000, 150_000, m_req)
    lat_back = opts.latency + rng.exponential(opts.jitter, m_req)
    return _Requests(call=req_call, server=req_server, of_op=op_req,
                     send_after=send_after, lat_out=lat_out, service=service, lat_back=lat_back)


def _call_times(opts: SynthOptions, rng: np.random.Generator, calls: _Calls, reqs: _Requests, k1: int,
                total_per_rank: int, t_next: np.ndarray) -> _CallTimes:
    """Each call lasts its requests' round trips (else a short while) and follows the rank's previous
    call after a gap (``t_next``: where each rank's next call may start); a collective call lasts from
    the first rank's start to the last's end."""
    n, per_rank = calls.n, calls.per_rank
    need = np.zeros(n)
    np.maximum.at(need, reqs.call, reqs.send_after + reqs.lat_out + reqs.service + reqs.lat_back)
    duration = np.where(need > 0, need + rng.integers(500, 5_000, n), rng.integers(20_000, 200_000, n))
    duration = np.ceil(duration).astype(np.int64)
    busy = duration.reshape(opts.ranks, per_rank)
    steps = busy + _gaps(opts, rng, busy, k1, total_per_rank, t_next)
    t_start = (np.cumsum(steps, axis=1) - steps + t_next[:, None]).reshape(-1)
    if calls.collective_idx.any():
        t_grid, d_grid = t_start.reshape(opts.ranks, per_rank), duration.reshape(opts.ranks, per_rank)
        start = t_grid.min(axis=0)
        end = (start + d_grid).max(axis=0)
        t_grid[:, calls.collective_idx] = start[calls.collective_idx]
        d_grid[:, calls.collective_idx] = (end - start)[calls.collective_idx]
        t_start, duration = t_grid.reshape(-1), d_grid.reshape(-1)
    return _CallTimes(start=t_start, duration=duration, end=t_start + duration)


def _gaps(opts: SynthOptions, rng: np.random.Generator, busy: np.ndarray, k1: int, total_per_rank: int,
          t_next: np.ndarray) -> np.ndarray:
    """The gap before each call (``busy``: the calls' durations, rank by rank): with ``opts.duration``,
    this chunk's share of it spread in random gaps; else a short random one."""
    if opts.duration:
        share = T_BASE + opts.duration * k1 // total_per_rank
        room = np.maximum(share - t_next[:, None] - busy.sum(axis=1, keepdims=True), 0)
        weights = rng.exponential(1.0, busy.shape)
        return (weights / weights.sum(axis=1, keepdims=True) * room).astype(np.int64)
    return rng.integers(1_000, 50_000, busy.shape)


def _request_times(reqs: _Requests, t_start: np.ndarray) -> _RequestTimes:
    """The requests' times, from their calls' starts."""
    sent = t_start[reqs.call] + reqs.send_after
    received = sent + np.rint(reqs.lat_out).astype(np.int64)
    answered = received + reqs.service
    back = answered + np.rint(reqs.lat_back).astype(np.int64)
    return _RequestTimes(sent=sent, received=received, answered=answered, back=back)


def _op_times(opts: SynthOptions, rng: np.random.Generator, calls: _Calls, ops: _DiskOps, reqs: _Requests,
              wire: _RequestTimes) -> tuple[np.ndarray, np.ndarray]:
    """The disk operations' starts and ends, inside their request; write-backs end after the response."""
    r = reqs.of_op
    op_start = wire.received[r] + 200 + (rng.random(len(r)) * (reqs.service[r] - 400) * 0.5).astype(np.int64)
    op_end = op_start + 1 + (rng.random(len(r)) * (wire.answered[r] - 200 - op_start)).astype(np.int64)
    late = calls.write[ops.call] & (rng.random(len(r)) < opts.async_share)
    op_end[late] = wire.answered[r][late] + rng.integers(1_000, 2_000_000, int(late.sum()))
    return op_start, op_end


def _unattributed(opts: SynthOptions, rng: np.random.Generator, m_ops: int,
                  times: _CallTimes) -> _Unattributed:
    """A share ``unattributed_share`` of ``m_ops`` disk operations more, of no request."""
    n_unattr = int(round(m_ops * opts.unattributed_share))
    un_call = rng.integers(0, len(times.start), n_unattr)
    un_start = times.start[un_call] + (rng.random(n_unattr) * times.duration[un_call] * 0.5).astype(np.int64)
    un_end = un_start + 1 + (rng.random(n_unattr) * (times.end[un_call] - un_start)).astype(np.int64)
    return _Unattributed(call=un_call, start=un_start, end=un_end)


def _request_ids(opts: SynthOptions, calls: _Calls, reqs: _Requests, misjoined: int, k0: int) -> np.ndarray:
    """The CallID each request logs: its call's; ``misjoined`` independent ones another call's of the
    same rank (drawn from a generator of their own)."""
    per_rank = calls.per_rank
    req_ids = calls.logged_id[reqs.call].copy()
    req_own = ~calls.collective[reqs.call]
    other_rng = np.random.default_rng([opts.seed, 1, k0])  # (a trace differs from its twin only here)
    wrong = other_rng.choice(np.nonzero(req_own)[0], min(misjoined, int(req_own.sum())), replace=False)
    if len(wrong):
        c = reqs.call[wrong]
        step = other_rng.integers(1, max(per_rank, 2), len(c))
        other = (c // per_rank) * per_rank + (c % per_rank + step) % per_rank
        ok = calls.stamped[other] & ~calls.collective[other] & (other != c)
        req_ids[wrong[ok]] = calls.callid[other[ok]]
    return req_ids


def _events(opts: SynthOptions, rng: np.random.Generator, calls: _Calls, ops: _DiskOps, reqs: _Requests,
            un: _Unattributed, req_ids: np.ndarray, carry: _Carry) -> _Events:
    """The server events: their servers (the unattributed operations' drawn now), ids (per server 1, 2,
    ... over all chunks: ``carry.events``) and CallIDs: the request's (``req_ids``) for an independent
    call's, every rank's for a collective group's, none for an unattributed operation."""
    n_unattr, m_req = len(un.call), len(reqs.call)
    ev_server = np.concatenate([ops.server, rng.integers(0, opts.servers, n_unattr), reqs.server])
    event_id = np.empty(len(ev_server), dtype=np.int64)
    for s_ in range(opts.servers):  # per-server event ids 1, 2, ...
        mask = ev_server == s_
        event_id[mask] = carry.events[s_] + np.arange(1, mask.sum() + 1)
        carry.events[s_] += mask.sum()
    shared_req = calls.collective[reqs.call]
    lengths = np.concatenate([np.where(shared_req[reqs.of_op], opts.ranks, 1), np.zeros(n_unattr, np.int64),
                              np.where(shared_req, opts.ranks, 1)])
    values = np.empty(int(lengths.sum()), dtype=np.uint64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    ev_req = np.concatenate([reqs.of_op, np.full(n_unattr, -1), np.arange(m_req)])  # request of each event
    single = lengths == 1
    values[offsets[:-1][single]] = req_ids[ev_req[single]]
    multi = np.nonzero(lengths > 1)[0]
    if len(multi):
        group_ids = calls.callid.reshape(opts.ranks, calls.per_rank)[:, ops.group_first].T  # (groups, ranks)
        group_of_req = np.searchsorted(ops.group_first, reqs.call % calls.per_rank)
        pos = offsets[multi][:, None] + np.arange(opts.ranks)
        values[pos.reshape(-1)] = group_ids[group_of_req[ev_req[multi]]].reshape(-1)
    return _Events(server=ev_server, event_id=event_id, req=ev_req, lengths=lengths, offsets=offsets,
                   values=values)


def _on_clock(clock_of: dict, t: np.ndarray, domain: np.ndarray, prefix: str) -> np.ndarray:
    """Times ``t`` as the clocks ``{prefix}{domain}`` read them (only the skewed ones are looked for: the
    domains of millions of rows are not sorted for their few values)."""
    out = t.copy()
    for name, sk in clock_of.items():
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            sel = domain == int(name[len(prefix):])
            if sel.any():
                out[sel] = sk.local(t[sel], T_BASE)
    return out


def _picked(values: list[str], index: np.ndarray) -> pa.Array:
    """``values[index]`` as a string column (from indices: a numpy array of strings costs 4 bytes a
    character and seconds to convert at millions of rows)."""
    return pa.DictionaryArray.from_arrays(pa.array(index, pa.int32()), pa.array(values)).cast(pa.string())


def _same(value: str, n: int) -> pa.Array:
    """A string column of ``n`` times ``value``."""
    return pa.repeat(pa.scalar(value), n)


#: the data functions, by calls.write
_DATA_FUNCS = ["MPI_File_read_at", "MPI_File_write_at"]


def _client_table(names: np.ndarray, clock_of: dict, calls: _Calls, reqs: _Requests, times: _CallTimes,
                  wire: _RequestTimes, host: np.ndarray, first_req: int) -> pa.Table:
    """The client log: a row per call, then one per request (an rpc row; ``req_seq`` from ``first_req``)."""
    n, n_rpc = calls.n, len(reqs.call)
    hosts = [f"host{h}" for h in range(int(host.max(initial=0)) + 1)]
    req_host = host[reqs.call]
    return pa.concat_tables([S.CLIENT.arrow(n, {
        "callid": pa.array(calls.logged_id, pa.uint64()), "rank": calls.rank, "clock": _picked(hosts, host),
        "kind": _same("call", n), "func": _picked(_DATA_FUNCS, calls.write),
        "file": _same("/pvfs2/synth", n), "fid": np.ones(n, np.int64),
        "offset": calls.counter.astype(np.int64) * 65536, "size": calls.size, "count": calls.size,
        "datatype": _same("MPI_BYTE", n), "bytes": calls.size, "collective": calls.collective,
        "coll_seq": pa.array(calls.coll_seq, mask=calls.coll_seq < 0),
        "t_start": _on_clock(clock_of, times.start, host, "host"),
        "t_end": _on_clock(clock_of, times.end, host, "host"),
    }), S.CLIENT.arrow(n_rpc, {
        "callid": pa.array(np.where(calls.collective[reqs.call], np.uint64(LAYOUT.sentinel),
                                    calls.logged_id[reqs.call]), pa.uint64()),
        "rank": calls.rank[reqs.call], "clock": _picked(hosts, req_host),
        "kind": _same("rpc", n_rpc), "func": _picked(_DATA_FUNCS, calls.write[reqs.call]),
        "t_start": _on_clock(clock_of, wire.sent, req_host, "host"),
        "t_end": _on_clock(clock_of, wire.back, req_host, "host"),
        "server": _picked(list(names), reqs.server),
        "op": _picked(["io_read", "io_write"], calls.write[reqs.call]),
        "req_seq": first_req + np.arange(n_rpc, dtype=np.int64),
        "t_recv": _on_clock(clock_of, wire.received, reqs.server, "io"),
        "t_send": _on_clock(clock_of, wire.answered, reqs.server, "io"),
    })])


def _server_table(names: np.ndarray, clock_of: dict, calls: _Calls, ops: _DiskOps, reqs: _Requests,
                  un: _Unattributed, ev: _Events, starts: np.ndarray, ends: np.ndarray) -> pa.Table:
    """The server log: a row per event (``starts`` and ``ends`` on the reference clock); each CallID's
    bytes of an event all of it for one CallID, for several an equal split."""
    m, m_req, n_trove = len(ev.server), len(reqs.call), len(ops.call) + len(un.call)
    ev_callid = np.full(m, np.uint64(LAYOUT.sentinel), dtype=np.uint64)
    single = ev.lengths == 1
    ev_callid[single] = ev.values[ev.offsets[:-1][single]]
    req_event = ev.event_id[n_trove:]
    ev_size = np.concatenate([np.full(n_trove, 65536), calls.size[reqs.call]])
    ev_op = np.concatenate([calls.write[ops.call], calls.write[un.call], 2 + calls.write[reqs.call]])
    value_ev = np.repeat(np.arange(m), ev.lengths)
    within = np.arange(len(ev.values)) - ev.offsets[:-1][value_ev]
    n_of, size_of = ev.lengths[value_ev], ev_size[value_ev]
    value_bytes = size_of // n_of + (within < size_of % n_of)
    per_callid = pa.ListArray.from_arrays(pa.array(ev.offsets.astype(np.int32)),
                                          pa.array(value_bytes, pa.int64()))
    return S.SERVER.arrow(m, {
        "server": _picked(list(names), ev.server), "clock": _picked(list(names), ev.server),
        "layer": _picked(["trove", "req"], np.r_[np.zeros(n_trove, np.int8), np.ones(m_req, np.int8)]),
        "op": _picked(["trove_read", "trove_write", "io_read", "io_write"], ev_op),
        "callid": pa.array(ev_callid, pa.uint64()),
        "callids": pa.ListArray.from_arrays(pa.array(ev.offsets.astype(np.int32)),
                                            pa.array(ev.values, pa.uint64())),
        "callid_bytes": per_callid,
        "callid_own": per_callid,  # (no two calls own the same bytes, no holes: the shares are their own)
        "rank": np.concatenate([calls.rank[ops.call], calls.rank[un.call], calls.rank[reqs.call]]),
        "req_id": ev.req, "event_id": ev.event_id,
        "parent": np.concatenate([req_event[reqs.of_op], np.full(len(un.call), -1), np.full(m_req, -1)]),
        "handle": np.full(m, 42, np.uint64), "offset": np.zeros(m, np.int64), "size": ev_size,
        "t_start": _on_clock(clock_of, starts, ev.server, "io"),
        "t_end": _on_clock(clock_of, ends, ev.server, "io"),
    })


def _truth_table(names: np.ndarray, m_ops: int, ev: _Events) -> pa.Table:
    """The arrows: a row per CallID of each disk operation of a request (the first ``m_ops`` events)."""
    disk = np.r_[np.ones(m_ops, bool), np.zeros(len(ev.server) - m_ops, bool)]
    n_ids = np.where(disk, ev.lengths, 0)
    return pa.table({
        "callid": pa.array(ev.values[np.repeat(disk, ev.lengths)], pa.uint64()),
        "server": _picked(list(names), np.repeat(ev.server, n_ids)),
        "event_id": np.repeat(ev.event_id, n_ids),
    })
