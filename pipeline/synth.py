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


def _chunk(opts: SynthOptions, rng: np.random.Generator, names: np.ndarray, clock_of: dict, k0: int, k1: int,
           total_per_rank: int, misjoined: int, carry: _Carry) -> tuple[list[pa.Table], dict]:
    """Calls ``k0 .. k1`` of every rank: the client, server and truth tables, and their row counts."""
    counter_bits = LAYOUT.counter_bits
    sentinel = np.uint64(LAYOUT.sentinel)
    per_rank = k1 - k0
    n, nsrv = per_rank * opts.ranks, opts.servers

    # calls, rank-major: rank r makes calls r*per_rank ... in time order
    rank = np.repeat(np.arange(opts.ranks, dtype=np.int32), per_rank)
    counter = np.tile(np.arange(k0 + 1, k1 + 1, dtype=np.uint64), opts.ranks)
    callid = (rank.astype(np.uint64) << np.uint64(counter_bits)) | counter
    collective_idx = rng.random(per_rank) < opts.collective_share  # the same call index on every rank
    collective = np.tile(collective_idx, opts.ranks)
    coll_seq = np.where(collective, np.tile(np.arange(k0, k1), opts.ranks), -1)
    stamped = rng.random(n) >= opts.unstamped_share
    stamped[collective] = True
    logged_id = np.where(stamped, callid, sentinel)
    write = rng.random(n) < 0.5
    size = rng.integers(1, 64, n) * 65536

    # disk operations: independent calls own theirs; a collective group's are shared by all ranks and
    # sent by one aggregator (rank g % ranks for the group of call g)
    owner_call = np.repeat(np.nonzero(~collective & stamped)[0], opts.fanout)
    group_first = np.nonzero(collective_idx)[0]
    aggregator_call = ((k0 + group_first) % opts.ranks) * per_rank + group_first
    shared_group = np.repeat(group_first, opts.fanout)
    n_own, n_shared = len(owner_call), len(shared_group)
    op_call = np.concatenate([owner_call, np.repeat(aggregator_call, opts.fanout)])  # the requesting call
    op_server = rng.integers(0, nsrv, n_own + n_shared)

    # requests: one per (requesting call, server); times relative to the call's start
    req_key, op_req = np.unique(op_call.astype(np.int64) * nsrv + op_server, return_inverse=True)
    req_call, req_server = req_key // nsrv, req_key % nsrv
    m_req = len(req_key)
    send_after = rng.integers(500, 5_000, m_req)
    lat_out = opts.latency + rng.exponential(opts.jitter, m_req)
    service = rng.integers(20_000, 150_000, m_req)
    lat_back = opts.latency + rng.exponential(opts.jitter, m_req)
    need = np.zeros(n)
    np.maximum.at(need, req_call, send_after + lat_out + service + lat_back)
    duration = np.where(need > 0, need + rng.integers(500, 5_000, n), rng.integers(20_000, 200_000, n))
    duration = np.ceil(duration).astype(np.int64)
    busy = duration.reshape(opts.ranks, per_rank)
    if opts.duration:  # this chunk's share of the duration, spread in random gaps
        share = T_BASE + opts.duration * k1 // total_per_rank
        room = np.maximum(share - carry.t_next[:, None] - busy.sum(axis=1, keepdims=True), 0)
        weights = rng.exponential(1.0, (opts.ranks, per_rank))
        gap = (weights / weights.sum(axis=1, keepdims=True) * room).astype(np.int64)
    else:
        gap = rng.integers(1_000, 50_000, (opts.ranks, per_rank))
    steps = busy + gap
    t_start = (np.cumsum(steps, axis=1) - steps + carry.t_next[:, None]).reshape(-1)
    if collective_idx.any():  # a collective call lasts from the first rank's start to the last's end
        t_grid, d_grid = t_start.reshape(opts.ranks, per_rank), duration.reshape(opts.ranks, per_rank)
        start = t_grid.min(axis=0)
        end = (start + d_grid).max(axis=0)
        t_grid[:, collective_idx] = start[collective_idx]
        d_grid[:, collective_idx] = (end - start)[collective_idx]
        t_start, duration = t_grid.reshape(-1), d_grid.reshape(-1)
    t_end = t_start + duration
    carry.t_next = t_end.reshape(opts.ranks, per_rank).max(axis=1)
    sent = t_start[req_call] + send_after
    received = sent + np.rint(lat_out).astype(np.int64)
    answered = received + service
    back = answered + np.rint(lat_back).astype(np.int64)

    # Trove operations inside their request; write-backs end after the response
    r = op_req
    op_start = received[r] + 200 + (rng.random(len(r)) * (service[r] - 400) * 0.5).astype(np.int64)
    op_end = op_start + 1 + (rng.random(len(r)) * (answered[r] - 200 - op_start)).astype(np.int64)
    op_write = write[op_call]
    late = op_write & (rng.random(len(r)) < opts.async_share)
    op_end[late] = answered[r][late] + rng.integers(1_000, 2_000_000, int(late.sum()))
    # unattributed operations: in some call's window, on any server, no request
    n_unattr = int(round((n_own + n_shared) * opts.unattributed_share))
    un_call = rng.integers(0, n, n_unattr)
    un_start = t_start[un_call] + (rng.random(n_unattr) * duration[un_call] * 0.5).astype(np.int64)
    un_end = un_start + 1 + (rng.random(n_unattr) * (t_end[un_call] - un_start)).astype(np.int64)

    # CallIDs: of the requesting call (own), of every rank (collective group); mis-joined requests
    req_ids = logged_id[req_call].copy()
    req_own = ~collective[req_call]
    other_rng = np.random.default_rng([opts.seed, 1, k0])  # (a trace differs from its twin only here)
    wrong = other_rng.choice(np.nonzero(req_own)[0], min(misjoined, int(req_own.sum())), replace=False)
    if len(wrong):
        c = req_call[wrong]
        step = other_rng.integers(1, max(per_rank, 2), len(c))
        other = (c // per_rank) * per_rank + (c % per_rank + step) % per_rank
        ok = stamped[other] & ~collective[other] & (other != c)
        req_ids[wrong[ok]] = callid[other[ok]]
    group_ids = callid.reshape(opts.ranks, per_rank)[:, group_first].T  # (groups, ranks)
    group_of_req = np.searchsorted(group_first, req_call % per_rank)
    shared_req = ~req_own

    # server events: own ops, shared ops, unattributed ops, then one req event per request
    m_ops = n_own + n_shared
    ev_server = np.concatenate([op_server, rng.integers(0, nsrv, n_unattr), req_server])
    m = len(ev_server)
    event_id = np.empty(m, dtype=np.int64)
    for s_ in range(nsrv):  # per-server event ids 1, 2, ...
        mask = ev_server == s_
        event_id[mask] = carry.events[s_] + np.arange(1, mask.sum() + 1)
        carry.events[s_] += mask.sum()
    req_event = event_id[m_ops + n_unattr:]
    lengths = np.concatenate([np.where(shared_req[op_req], opts.ranks, 1), np.zeros(n_unattr, np.int64),
                              np.where(shared_req, opts.ranks, 1)])
    values = np.empty(int(lengths.sum()), dtype=np.uint64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    ev_req = np.concatenate([op_req, np.full(n_unattr, -1), np.arange(m_req)])  # request of each event
    single = lengths == 1
    values[offsets[:-1][single]] = req_ids[ev_req[single]]
    multi = np.nonzero(lengths > 1)[0]
    if len(multi):
        pos = offsets[multi][:, None] + np.arange(opts.ranks)
        values[pos.reshape(-1)] = group_ids[group_of_req[ev_req[multi]]].reshape(-1)
    ev_callid = np.full(m, sentinel, dtype=np.uint64)
    ev_callid[single] = values[offsets[:-1][single]]
    ev_rank = np.concatenate([rank[op_call], rank[un_call], rank[req_call]])
    ev_start = np.concatenate([op_start, un_start, received])
    ev_end = np.concatenate([op_end, un_end, answered - 100])
    ev_parent = np.concatenate([req_event[op_req], np.full(n_unattr, -1), np.full(m_req, -1)])
    req_ops = np.where(write[req_call], "io_write", "io_read")
    ev_layer = np.concatenate([np.full(m_ops + n_unattr, "trove"), np.full(m_req, "req")])
    ev_op = np.concatenate([np.where(op_write, "trove_write", "trove_read"),
                            np.where(write[un_call], "trove_write", "trove_read"), req_ops])
    ev_size = np.concatenate([np.full(m_ops + n_unattr, 65536), size[req_call]])

    # clocks: every host's and server's times as that clock reads them
    host = rank // opts.ranks_per_host if opts.ranks_per_host else np.zeros(n, np.int32)

    def on_clock(t: np.ndarray, domain: np.ndarray, prefix: str) -> np.ndarray:
        out = t.copy()
        for d in np.unique(domain):
            sk = clock_of.get(f"{prefix}{d}")
            if sk is not None:
                sel = domain == d
                out[sel] = sk.local(t[sel], T_BASE)
        return out

    call_clock = np.char.add("host", host.astype(str))
    req_host = host[req_call]
    n_rpc = m_req
    client = pa.concat_tables([S.CLIENT.arrow(n, {
        "callid": pa.array(logged_id, pa.uint64()), "rank": rank, "clock": pa.array(call_clock),
        "kind": pa.array(["call"] * n),
        "func": pa.array(np.where(write, "MPI_File_write_at", "MPI_File_read_at")),
        "file": pa.array(["/pvfs2/synth"] * n), "fid": np.ones(n, np.int64),
        "offset": counter.astype(np.int64) * 65536, "size": size, "count": size,
        "datatype": pa.array(["MPI_BYTE"] * n), "bytes": size, "collective": collective,
        "coll_seq": pa.array(coll_seq, mask=coll_seq < 0),
        "t_start": on_clock(t_start, host, "host"), "t_end": on_clock(t_end, host, "host"),
    }), S.CLIENT.arrow(n_rpc, {
        "callid": pa.array(np.where(shared_req, sentinel, logged_id[req_call]), pa.uint64()),
        "rank": rank[req_call], "clock": pa.array(call_clock[req_call]), "kind": pa.array(["rpc"] * n_rpc),
        "func": pa.array(np.where(write[req_call], "MPI_File_write_at", "MPI_File_read_at")),
        "t_start": on_clock(sent, req_host, "host"), "t_end": on_clock(back, req_host, "host"),
        "server": pa.array(names[req_server]), "op": pa.array(req_ops),
        "req_seq": carry.requests + np.arange(m_req, dtype=np.int64),
        "t_recv": on_clock(received, req_server, "io"), "t_send": on_clock(answered, req_server, "io"),
    })])
    # each CallID's bytes of an event: all of them for one CallID, for several an equal split
    value_ev = np.repeat(np.arange(m), lengths)
    within = np.arange(len(values)) - offsets[:-1][value_ev]
    n_of, size_of = lengths[value_ev], ev_size[value_ev]
    value_bytes = size_of // n_of + (within < size_of % n_of)
    srv = S.SERVER.arrow(m, {
        "server": pa.array(names[ev_server]), "clock": pa.array(names[ev_server]),
        "layer": pa.array(ev_layer), "op": pa.array(ev_op), "callid": pa.array(ev_callid, pa.uint64()),
        "callids": pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)),
                                            pa.array(values, pa.uint64())),
        "callid_bytes": pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)),
                                                 pa.array(value_bytes, pa.int64())),
        "rank": ev_rank, "req_id": ev_req, "event_id": event_id, "parent": ev_parent,
        "handle": np.full(m, 42, np.uint64), "offset": np.zeros(m, np.int64), "size": ev_size,
        "t_start": on_clock(ev_start, ev_server, "io"), "t_end": on_clock(ev_end, ev_server, "io"),
    })
    disk = np.r_[np.ones(m_ops, bool), np.zeros(n_unattr + m_req, bool)]  # arrows: disk ops with CallIDs
    n_ids = np.where(disk, lengths, 0)
    truth = pa.table({
        "callid": pa.array(values[np.repeat(disk, lengths)], pa.uint64()),
        "server": pa.array(np.repeat(names[ev_server], n_ids)), "event_id": np.repeat(event_id, n_ids),
    })
    carry.requests += m_req
    return [client, srv, truth], {"calls": n, "rpcs": n_rpc, "server_ops": m, "arrows": truth.num_rows}
