"""``callid synth``: synthetic client and server logs with known arrows (the ground truth).

Each rank makes ``calls / ranks`` sequential calls; each call causes ``fanout``
disk operations on random servers, inside the call's time window.  A share of
the calls are collective: one call per rank with the same ``coll_seq`` whose disk
operations all carry every rank's CallID (fan-in).  Some server operations carry
no CallID (unattributed) and some calls are not stamped (the all-ones sentinel).
Generation is vectorized (numpy), so millions of events take seconds.

Writes ``client.parquet``, ``server.parquet`` (the schemas of a real run) and
``truth.parquet`` (callid, server, event_id: one row per true arrow).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import schema as S
from pipeline.atomic import replacing
from pipeline.logwriter import file_metadata

LAYOUT = (64, 23)
TRUTH_SCHEMA = pa.schema([("callid", pa.uint64()), ("server", pa.string()), ("event_id", pa.int64())])


@dataclass
class SynthOptions:
    """Parameters of a synthetic trace."""

    ranks: int = 4
    servers: int = 2
    calls: int = 1000
    fanout: int = 10
    collective_share: float = 0.1
    unattributed_share: float = 0.01
    unstamped_share: float = 0.01
    seed: int = 0


def synthesize(opts: SynthOptions, out: str | Path) -> dict:
    """Write the three files into ``out``; return their row counts."""
    rng = np.random.default_rng(opts.seed)
    total_bits, rank_bits = LAYOUT
    counter_bits = total_bits - rank_bits
    sentinel = np.uint64((1 << total_bits) - 1)
    per_rank = max(1, opts.calls // opts.ranks)
    n = per_rank * opts.ranks

    # calls, rank-major: rank r makes calls r*per_rank ... in time order
    rank = np.repeat(np.arange(opts.ranks, dtype=np.int32), per_rank)
    counter = np.tile(np.arange(1, per_rank + 1, dtype=np.uint64), opts.ranks)
    callid = (rank.astype(np.uint64) << np.uint64(counter_bits)) | counter
    duration = rng.integers(20_000, 200_000, n)  # ns
    gap = rng.integers(1_000, 50_000, n)
    steps = (duration + gap).reshape(opts.ranks, per_rank)
    t_start = (np.cumsum(steps, axis=1) - steps).reshape(-1) + 1_000_000_000
    # collective groups: the same call index on every rank
    collective_idx = rng.random(per_rank) < opts.collective_share
    collective = np.tile(collective_idx, opts.ranks)
    coll_seq = np.where(collective, np.tile(np.arange(per_rank), opts.ranks), -1)
    if collective_idx.any():  # a collective call lasts from the first rank's start to the last's end
        t_grid = t_start.reshape(opts.ranks, per_rank)
        d_grid = duration.reshape(opts.ranks, per_rank)
        start = t_grid.min(axis=0)
        end = (t_grid + d_grid).max(axis=0)
        t_grid[:, collective_idx] = start[collective_idx]
        d_grid[:, collective_idx] = (end - start)[collective_idx]
        t_start, duration = t_grid.reshape(-1), d_grid.reshape(-1)
    t_end = t_start + duration
    stamped = rng.random(n) >= opts.unstamped_share
    stamped[collective] = True
    logged_id = np.where(stamped, callid, sentinel)
    write = rng.random(n) < 0.5
    size = rng.integers(1, 64, n) * 65536

    # disk operations: independent calls own theirs; a collective group's are shared by all ranks
    owner_call = np.repeat(np.nonzero(~collective & stamped)[0], opts.fanout)
    group_first = np.nonzero(collective_idx)[0]  # index of rank 0's call of each group
    shared_group = np.repeat(group_first, opts.fanout)
    n_own, n_shared = len(owner_call), len(shared_group)
    n_unattr = int(round((n_own + n_shared) * opts.unattributed_share))
    op_call = np.concatenate([owner_call, shared_group, rng.integers(0, n, n_unattr)])
    m = len(op_call)
    win_start, win_len = t_start[op_call], duration[op_call]
    op_start = win_start + (rng.random(m) * win_len * 0.5).astype(np.int64)
    op_end = op_start + np.maximum(1, (rng.random(m) * (win_start + win_len - op_start)).astype(np.int64))
    server = rng.integers(0, opts.servers, m)
    event_id = np.empty(m, dtype=np.int64)
    for s in range(opts.servers):  # per-server event ids 1, 2, ...
        mask = server == s
        event_id[mask] = np.arange(1, mask.sum() + 1)
    # callid lists: one id (own), every rank's id (shared), none (unattributed)
    group_ids = callid.reshape(opts.ranks, per_rank)[:, shared_group].T if n_shared else np.empty((0, 0))
    lengths = np.concatenate([np.ones(n_own, np.int64), np.full(n_shared, opts.ranks),
                              np.zeros(n_unattr, np.int64)])
    values = np.concatenate([callid[owner_call], group_ids.reshape(-1).astype(np.uint64)])
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    op_callid = np.full(m, sentinel, dtype=np.uint64)
    op_callid[:n_own] = callid[owner_call]
    op_write = write[op_call]

    meta_args = (f"{total_bits}/{rank_bits}", f"synth-{opts.seed}", json.dumps({"synth": asdict(opts)}))
    client = pa.table({
        "callid": pa.array(logged_id, pa.uint64()), "rank": rank, "clock": pa.array(["host0"] * n),
        "kind": pa.array(["call"] * n),
        "func": pa.array(np.where(write, "MPI_File_write_at", "MPI_File_read_at")),
        "file": pa.array(["/pvfs2/synth"] * n), "fid": np.ones(n, np.int64),
        "offset": counter.astype(np.int64) * 65536,
        "size": size, "count": size, "datatype": pa.array(["MPI_BYTE"] * n), "bytes": size,
        "collective": collective, "coll_seq": pa.array(coll_seq, mask=coll_seq < 0),
        "rid": pa.nulls(n, pa.int64()), "t_start": t_start, "t_end": t_end,
        "error": pa.nulls(n, pa.string()), "server": pa.nulls(n, pa.string()),
        "op": pa.nulls(n, pa.string()), "req_seq": pa.nulls(n, pa.int64()),
        "t_recv": pa.nulls(n, pa.int64()), "t_send": pa.nulls(n, pa.int64()),
    })
    names = np.array([f"io{s}" for s in range(opts.servers)])
    srv = pa.table({
        "server": pa.array(names[server]), "clock": pa.array(names[server]), "layer": pa.array(["trove"] * m),
        "op": pa.array(np.where(op_write, "trove_write", "trove_read")),
        "callid": pa.array(op_callid, pa.uint64()),
        "callids": pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, pa.uint64())),
        "rank": rank[op_call], "req_id": np.arange(m, dtype=np.int64), "event_id": event_id,
        "parent": np.full(m, -1, np.int64), "handle": np.full(m, 42, np.uint64),
        "offset": np.zeros(m, np.int64), "size": np.full(m, 65536, np.int64),
        "t_start": op_start, "t_end": op_end,
    })
    truth_ids = values
    truth_server = np.repeat(names[server[: n_own + n_shared]], lengths[: n_own + n_shared])
    truth_event = np.repeat(event_id[: n_own + n_shared], lengths[: n_own + n_shared])
    truth = pa.table({"callid": pa.array(truth_ids, pa.uint64()), "server": pa.array(truth_server),
                      "event_id": truth_event})
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name, table, schema, kind in (("client", client, S.CLIENT_SCHEMA, S.KIND_CLIENT),
                                      ("server", srv, S.SERVER_SCHEMA, S.KIND_SERVER),
                                      ("truth", truth, TRUTH_SCHEMA, None)):
        meta = file_metadata(kind, *meta_args) if kind else {b"callid.kind": b"truth"}
        with replacing(out / f"{name}.parquet") as tmp:
            pq.write_table(table.cast(schema).replace_schema_metadata(meta), tmp, row_group_size=1 << 20)
    return {"calls": n, "server_ops": m, "arrows": len(truth_ids)}
