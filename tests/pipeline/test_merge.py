"""The pipeline on small logs with known answers, and its handling of bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from callid import api
from callid_core import schema as S
from callid_core.choices import RowFormat
from callid_core.errors import InputError
from callid_core.ids import Layout
from callid_core.partlog import PartLog, combine_parts
from callid_core.schema import file_metadata
from callid_core.tables import MPI_ONLY, TYPE_ONLY
from callid_core.units import ranks_text
from pipeline import clocks
from pipeline.formatting import format_rows, stream_rows
from pipeline.load import validate_log
from pipeline.merge import merge
from pipeline.merged import CATALOG, open_merged
from pipeline.query import BATCH_ROWS, run_query, stream_query
from pipeline.stats import render_stats
from pipeline.synth import SynthOptions, synthesize
from tests.conftest import CALLID, ROOT, callid_cmd, cli, query

LAYOUT = "32/8"
NONE = 0xFFFFFFFF
A, B, C = 0x00000001, 0x01000001, 0x01000002  # rank 0 call 1, rank 1 calls 1 and 2


def sql_of(db, query: str) -> tuple[list[str], list[tuple]]:
    """``callid sql``'s result of ``query`` on the merged output ``db``."""
    with open_merged(db, sandbox=True) as m:
        return run_query(m, query)


def _meta(kind: str, layout: str = LAYOUT, run_id: str = "run1") -> dict[bytes, bytes]:
    return file_metadata(kind, layout, run_id, '{"servers": 2}')


def _call(callid, rank, func, size, t0):
    return S.CLIENT.row(callid=callid, rank=rank, clock="host0", func=func, file="/pvfs2/f", fid=1, offset=0,
                        size=size, count=size, datatype="MPI_BYTE", bytes=size, collective=False,
                        t_start=t0, t_end=t0 + 100)


def _op(server, layer, op, callids, event_id, size, t0, none=NONE, callid_bytes=(), callid_own=None):
    return S.SERVER.row(server=server, clock=server, layer=layer, op=op,
                        callid=callids[0] if len(callids) == 1 else none, callids=callids,
                        callid_bytes=callid_bytes,
                        callid_own=callid_bytes if callid_own is None else callid_own, rank=0, req_id=1,
                        event_id=event_id, handle=5, size=size, t_start=t0, t_end=t0 + 10)


CLIENT_ROWS = [
    _call(A, 0, "MPI_File_write_at", 300, 1000),
    _call(B, 1, "MPI_File_read_at", 200, 1100),
    _call(NONE, 1, "MPI_File_seek", 0, 1200),  # traced but not stamped
    _call(C, 1, "MPI_File_get_size", 0, 1300),  # stamped, caused nothing on disk
    S.CLIENT.row(callid=A, rank=0, clock="host0", kind="rpc", func="MPI_File_write_at", t_start=1001,
                 t_end=1090, server="io0", op="io", req_seq=1, t_recv=1010, t_send=1080),
]
SERVER_ROWS = [
    _op("io0", "trove", "trove_write", [A], 1, 100, 1010),
    _op("io0", "trove", "trove_write", [A], 2, 100, 1020),
    _op("io1", "trove", "trove_read", [B], 3, 150, 1110),
    _op("io1", "trove", "trove_read", [NONE], 4, 50, 1120),  # unattributed: only the sentinel
    # one disk op, two calls (fan-in): 60 of its bytes are A's, 40 B's
    _op("io1", "trove", "trove_write", [A, B], 5, 100, 1130, callid_bytes=[60, 40]),
    _op("io0", "flow", "flow_write", [A], 6, 200, 1005),  # not a disk operation
    _op("meta0", "meta", "keyval_read", [B], 7, 0, 1105),
    _op("io0", "req", "io", [A], 8, 300, 1002),  # not a disk operation
]


def _write(path, schema, rows, kind, layout=LAYOUT, run_id="run1", flush_rows=3):
    """A log written as a real run writes it: flushed parts, then combined into ``path``."""
    parts = path.parent / f"{path.stem}-parts"
    log = PartLog(schema, parts, path.stem, _meta(kind, layout, run_id), flush_rows=flush_rows)
    for row in rows:
        log.append(row)
    log.close()
    combine_parts(sorted(parts.glob("*.parquet")), path, schema, _meta(kind, layout, run_id))
    return path


@pytest.fixture
def logs(tmp_path):
    client = _write(tmp_path / "client.parquet", S.CLIENT_SCHEMA, CLIENT_ROWS, S.KIND_CLIENT)
    server = _write(tmp_path / "server.parquet", S.SERVER_SCHEMA, SERVER_ROWS, S.KIND_SERVER)
    return client, server


@pytest.fixture
def merged(logs, tmp_path):
    db = tmp_path / "m.duckdb"
    merge(str(logs[0]), str(logs[1]), str(db), clock_sync="none")  # the clocks are tested apart
    return db


def _columns(db, table):
    return [r[0] for r in query(db, f"DESCRIBE {table}")]


# --- tables -------------------------------------------------------------------------------------


def test_merge_returns_row_counts(logs, tmp_path):
    counts = merge(str(logs[0]), str(logs[1]), str(tmp_path / "c.duckdb"))
    assert counts == {"calls": 4, "waits": 0, "mpi_calls": 0, "nested_calls": 0, "datatypes": 0, "rpcs": 1,
                      "phases": 0, "server_ops": 8, "arrows": 6, "fanout": 4, "clocks": 4, "run": 18,
                      "source_io": 0}


def test_arrows_are_one_row_per_call_and_disk_operation_including_fan_in(merged):
    assert _columns(merged, "arrows") == [
        "callid", "callid_hex", "rank", "func", "file", "call_t_start", "call_t_end", "server", "layer",
        "op", "handle", "disk_offset", "file_offset", "file_end", "size", "share_bytes", "own_bytes", "holes",
        "rmw", "t_start", "t_end", "dur_ns", "t_rel_ns", "event_id", "n_callids", "exact"]
    rows = query(merged, "SELECT callid, event_id, server, layer, op, size, share_bytes, n_callids, exact, "
                      "call_t_start, dur_ns, t_rel_ns FROM arrows ORDER BY callid, event_id")
    assert rows == [(A, 1, "io0", "trove", "trove_write", 100, 100, 1, True, 1000, 10, 10),
                    (A, 2, "io0", "trove", "trove_write", 100, 100, 1, True, 1000, 10, 20),
                    (A, 5, "io1", "trove", "trove_write", 100, 60, 2, True, 1000, 10, 130),
                    (B, 3, "io1", "trove", "trove_read", 150, 150, 1, True, 1100, 10, 110),
                    (B, 5, "io1", "trove", "trove_write", 100, 40, 2, True, 1100, 10, 130),
                    (B, 7, "meta0", "meta", "keyval_read", 0, 0, 1, True, 1100, 10, 105)]
    # the shares count every disk byte once; size is each operation's whole size
    assert query(merged, "SELECT sum(share_bytes), sum(own_bytes), sum(size) FROM arrows") == [
        (450, 450, 550)]
    assert query(merged, "SELECT sum(size) FROM server_ops WHERE layer IN ('trove', 'meta') "
                      "AND len(callids) > 0") == [(450,)]
    assert query(merged, f"SELECT DISTINCT callid_hex, rank, func FROM arrows WHERE callid = {B}") == [
        ("0x01_000001", 1, "MPI_File_read_at")]


def test_fanout_counts_operations_servers_and_bytes_per_call(merged):
    rows = query(merged, "SELECT callid, callid_hex, func, size, disk_ops, servers, share_bytes, own_bytes, "
                         "inexact_arrows, bytes_per_server FROM fanout ORDER BY func")
    # share_bytes: each call's share of its operations (the shared event 5: 60 A's, 40 B's), so over
    # the calls they add up to the 450 bytes the disk operations moved
    assert rows == [
        (C, "0x01_000002", "MPI_File_get_size", 0, 0, 0, 0, 0, 0, []),
        (B, "0x01_000001", "MPI_File_read_at", 200, 3, 2, 190, 190, 0,
         [{"server": "io1", "ops": 2, "share_bytes": 190, "own_bytes": 190},
          {"server": "meta0", "ops": 1, "share_bytes": 0, "own_bytes": 0}]),
        (None, None, "MPI_File_seek", 0, 0, 0, 0, 0, 0, []),
        (A, "0x00_000001", "MPI_File_write_at", 300, 3, 2, 260, 260, 0,
         [{"server": "io0", "ops": 2, "share_bytes": 200, "own_bytes": 200},
          {"server": "io1", "ops": 1, "share_bytes": 60, "own_bytes": 60}]),
    ]
    assert query(merged, "SELECT sum(share_bytes) FROM fanout") == [(450,)]


def test_calls_reading_the_same_bytes_each_own_them_and_share_them(tmp_path):
    """One 100-byte read both calls read whole: each received 100 bytes (own_bytes), each has a share
    of 50 (share_bytes), so shares add up to the disk's 100 bytes and own bytes to the calls' 200."""
    client = _write(tmp_path / "c.parquet", S.CLIENT_SCHEMA, CLIENT_ROWS[:2], S.KIND_CLIENT)
    server = _write(tmp_path / "s.parquet", S.SERVER_SCHEMA, [
        _op("io0", "trove", "trove_read", [A, B], 1, 100, 1010, callid_bytes=[50, 50],
            callid_own=[100, 100])],
        S.KIND_SERVER)
    db = tmp_path / "m.duckdb"
    merge(str(client), str(server), str(db), clock_sync="none")
    assert query(db, "SELECT callid, size, share_bytes, own_bytes, exact FROM arrows ORDER BY callid") == [
        (A, 100, 50, 100, True), (B, 100, 50, 100, True)]
    assert query(db, "SELECT callid, share_bytes, own_bytes FROM fanout ORDER BY callid") == [
        (A, 50, 100), (B, 50, 100)]
    assert query(db, "SELECT callid_bytes, callid_own FROM server_ops") == [([50, 50], [100, 100])]


def test_request_level_attribution_is_flagged_and_left_out_of_the_bytes(tmp_path):
    client = _write(tmp_path / "c.parquet", S.CLIENT_SCHEMA, CLIENT_ROWS[:2], S.KIND_CLIENT)
    server = _write(tmp_path / "s.parquet", S.SERVER_SCHEMA, [
        _op("io0", "trove", "trove_write", [A, B], 1, 100, 1010),  # several CallIDs, no ownership
        _op("io0", "trove", "trove_write", [A, NONE, B], 2, 90, 1020, callid_bytes=[30, 0, 60]),
        _op("io0", "trove", "trove_write", [A, A], 3, 80, 1030, callid_bytes=[50, 30]),  # one call, twice
        _op("io0", "trove", "trove_getattr", [A, B], 4, 0, 1040),  # moves nothing: nothing of either
    ], S.KIND_SERVER)
    db = tmp_path / "m.duckdb"
    merge(str(client), str(server), str(db), clock_sync="none")
    assert query(db, "SELECT callid, event_id, share_bytes, own_bytes, n_callids, exact FROM arrows "
                     "ORDER BY ALL") == [
        (A, 1, None, None, 2, False), (A, 2, 30, 30, 2, True), (A, 3, 80, 80, 1, True), (A, 4, 0, 0, 2, True),
        (B, 1, None, None, 2, False), (B, 2, 60, 60, 2, True), (B, 4, 0, 0, 2, True)]
    # the unstamped CallID is left out of callids and, aligned, of callid_bytes and callid_own
    assert query(db, "SELECT callids, callid_bytes, callid_own FROM server_ops WHERE event_id = 2") == [
        ([A, B], [30, 60], [30, 60])]
    assert query(db, "SELECT callid, disk_ops, share_bytes, inexact_arrows FROM fanout ORDER BY callid") == [
        (A, 4, 110, 1), (B, 3, 60, 1)]
    stats = api.stats(db)
    assert stats["inexact_arrows"] == 2
    assert "2 arrows attributed at request level only" in render_stats(stats)


def test_calls_rpcs_and_server_ops(merged):
    client_cols = [f.name for f in S.CLIENT_SCHEMA]
    call_cols = ["file_offset" if c == "offset" else c
                 for c in client_cols[1:client_cols.index("server")]
                 if c not in ("kind", *MPI_ONLY, *TYPE_ONLY)]
    at = call_cols.index("t_end") + 1
    assert _columns(merged, "calls") == ["callid", "callid_hex", "counter", *call_cols[:at], "dur_ns",
                                         "t_rel_ns", *call_cols[at:]]
    assert query(merged, "SELECT callid, callid_hex, counter, func, dur_ns, t_rel_ns FROM calls "
                      "ORDER BY t_start") == [
        (A, "0x00_000001", 1, "MPI_File_write_at", 100, 0),
        (B, "0x01_000001", 1, "MPI_File_read_at", 100, 100),
        (None, None, None, "MPI_File_seek", 100, 200),
        (C, "0x01_000002", 2, "MPI_File_get_size", 100, 300)]
    # (callids: the log names none, so the one CallID of its callid column)
    assert query(merged, "SELECT * FROM rpcs") == [
        (A, "0x00_000001", [A], 0, "host0", "MPI_File_write_at", "io0", "io", 1, 1001, 1090, 89, 1, 1010,
         1080, None)]
    assert _columns(merged, "rpcs")[:2] == ["callid", "callid_hex"]
    server_cols = ["disk_offset" if f.name == "offset" else f.name for f in S.SERVER_SCHEMA][5:]
    assert _columns(merged, "server_ops") == ["server", "clock", "layer", "op", "callid", "callid_hex",
                                              *server_cols, "dur_ns", "t_rel_ns"]
    assert query(merged, "SELECT event_id, callid, callid_hex, callids FROM server_ops "
                      "WHERE event_id IN (4, 5) ORDER BY 1") == [(4, None, None, []), (5, None, None, [A, B])]


def test_clocks_run_and_events(merged):
    assert query(merged, "SELECT clock, source, offset_ns, drift_ppm, bound_ns, quality, method FROM clocks "
                      "ORDER BY clock") == [
        ("host0", "client", 0.0, 0.0, 0.0, "reference", "reference"),
        *[(c, "server", 0.0, 0.0, None, "none", "identity") for c in ("io0", "io1", "meta0")]]
    run = dict(query(merged, "SELECT key, value FROM run"))
    assert run == {
        "layout": LAYOUT, "sentinel": str(NONE), "clock_sync": "none", "start_ns": "1000",
        **{f"{k}.{key}": v for k in ("client", "server") for key, v in (
            ("config", '{"servers": 2}'), ("files", "1"), ("layout", LAYOUT), ("run_id", "run1"),
            ("schema_version", S.SCHEMA_VERSION), ("checksummed", "yes"))},
        "client.rows": str(len(CLIENT_ROWS)), "server.rows": str(len(SERVER_ROWS))}
    events = query(merged, "SELECT source, lane, layer, name, callid_hex, t_start, dur_ns, t_rel_ns, size "
                        "FROM events ORDER BY t_start, source")
    assert len(events) == len(CLIENT_ROWS) + len(SERVER_ROWS)
    assert events[:3] == [("client", "rank 0", "mpi", "MPI_File_write_at", "0x00_000001", 1000, 100, 0, 300),
                          ("client", "rank 0", "rpc", "io", "0x00_000001", 1001, 89, 1, None),
                          ("server", "io0", "req", "io", "0x00_000001", 1002, 10, 2, 300)]


@pytest.mark.parametrize("model", ["offset", "drift"])
def test_clock_alignment_takes_the_middle_of_what_the_constraints_allow(logs, tmp_path, model):
    # io0's constraints: request sent 1001 (client) <= received 1010 (io0): offset >= -9;
    # call A started 1000 <= its request event 1002: offset >= -2; reply sent 1080 <= received
    # 1090: offset <= 10.  The estimate is the middle, 4, guaranteed to within 6.
    db = tmp_path / f"{model}.duckdb"
    merge(str(logs[0]), str(logs[1]), str(db), clock_sync=model)
    (offset, drift, bound, quality, n, after), = query(
        db, "SELECT offset_ns, drift_ppm, bound_ns, quality, constraints, violations_after "
            "FROM clocks WHERE clock = 'io0'")
    assert (offset, n, after) == (4.0, 3, 0)
    assert 6.0 <= bound < 6.1  # (a drift up to 1000 ppm over the 78 ns window adds < 0.1)
    # three constraints over 78 ns cannot pin a drift: none is assumed, and the fit says so
    assert (drift, quality) == (0.0, "accurate" if model == "offset" else "approximate")
    assert query(db, "SELECT quality, bound_ns FROM clocks WHERE clock IN ('io1', 'meta0')") == [
        ("failed", None)] * 2  # no constraint reaches them: identity, and said so
    assert query(db, "SELECT t_recv, t_send FROM rpcs") == [(1014, 1084)]  # on the reference clock
    io0 = next(c for c in api.stats(db)["clocks"] if c["clock"] == "io0")
    assert (io0["offset_us"], io0["bound_us"], io0["constraints"], io0["violations_after"]) == (
        0.004, round(bound / 1e3, 3), 3, 0)


def test_64_bit_layout_prints_rank_and_counter_apart(tmp_path):
    none = (1 << 64) - 1
    a = (1 << 40) | 3  # layout 64/24: rank 1, counter 3
    client = _write(tmp_path / "c.parquet", S.CLIENT_SCHEMA, [_call(a, 1, "MPI_File_write", 8, 10)],
                    S.KIND_CLIENT, layout="64/24")
    server = _write(tmp_path / "s.parquet", S.SERVER_SCHEMA,
                    [_op("io0", "trove", "trove_write", [a, none, a], 1, 8, 20, none=none)],
                    S.KIND_SERVER, layout="64/24")
    db = tmp_path / "m.duckdb"
    merge(str(client), str(server), str(db))
    assert query(db, "SELECT callid_hex, counter FROM calls") == [("0x000001_0000000003", 3)]
    assert query(db, "SELECT callids FROM server_ops") == [([a, a],)]  # as logged, less the sentinel
    assert query(db, "SELECT callid_hex, n_callids FROM arrows") == [("0x000001_0000000003", 1)]  # one call
    assert ("sentinel", str(none)) in query(db, "SELECT * FROM run")


def test_directories_and_globs_of_parts_are_inputs(logs, tmp_path):
    assert len(list((tmp_path / "server-parts").glob("*.parquet"))) == 3
    info = validate_log(str(tmp_path / "client-parts"), S.KIND_CLIENT)
    assert (len(info.files), info.rows, info.layout, info.run_id) == (2, len(CLIENT_ROWS), LAYOUT, "run1")
    db = tmp_path / "parts.duckdb"
    merge(str(tmp_path / "client-parts"), str(tmp_path / "server-parts" / "*.parquet"), str(db))
    assert query(db, "SELECT count(*) FROM arrows") == [(6,)]


def test_a_runs_description_is_kept_and_shown(logs, tmp_path):
    db = tmp_path / "d.duckdb"
    said = "IOR, 4 ranks, cb_nodes=2 <b>tried</b>"
    result = cli("merge", *logs, "-o", db, "--description", said, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["run"] == 19  # (one row more)
    assert ("description", said) in query(db, "SELECT * FROM run")
    stats = api.stats(db)
    assert stats["description"] == said and render_stats(stats).splitlines()[1] == f"  {said}"
    too_long = cli("merge", *logs, "-o", tmp_path / "x.duckdb", "--description", "x" * (65 << 10))
    assert too_long.returncode == 2 and "--description: longer than 64 KiB" in too_long.stderr


def test_logs_written_whole_are_verified_and_others_merged_with_a_warning(logs, tmp_path):
    assert validate_log(str(logs[0]), S.KIND_CLIENT).metadata["checksummed"] == "yes"
    db = tmp_path / "parts.duckdb"
    merge(str(tmp_path / "client-parts"), str(logs[1]), str(db))  # (parts carry no checksum)
    assert ("client.checksummed", "no") in query(db, "SELECT * FROM run")
    assert [w for w in api.merge_warnings(db) if "checksum" in w] == [
        "the client log carried no checksum (parts of a run, or written by an earlier callid): damage to "
        "it could not be detected"]
    merge(str(logs[0]), str(logs[1]), str(db))
    assert not [w for w in api.merge_warnings(db) if "checksum" in w]


def test_extra_columns_and_other_writers_list_types_are_accepted(logs, tmp_path):
    table = pq.read_table(logs[1])
    item = pa.field("element", pa.uint64(), nullable=False)  # as DuckDB or Spark write lists
    fields = [pa.field(f.name, pa.list_(item)) if f.name == "callids" else f for f in table.schema]
    table = table.cast(pa.schema(fields, metadata=table.schema.metadata))
    table = table.append_column("note", pa.array(["x"] * table.num_rows))
    pq.write_table(table, tmp_path / "other.parquet")
    db = tmp_path / "o.duckdb"
    merge(str(logs[0]), str(tmp_path / "other.parquet"), str(db))
    assert query(db, "SELECT count(*) FROM arrows") == [(6,)]
    assert "note" not in _columns(db, "server_ops")


# --- statistics and queries ---------------------------------------------------------------------


def test_statistics(merged):
    stats = api.stats(merged)
    assert stats["distinct_callids"] == 3  # A, B and C; the unstamped seek has none
    assert stats["arrows"] == 6
    assert stats["avg_arrows_per_callid"] == 3.0  # 6 arrows over A and B
    assert stats["unattributed_server_ops"] == 1  # event 4
    # write_at, read_at, get_size; trove_write, trove_read, flow_write, keyval_read, req io
    assert stats["categories_with_callid"] == 8
    assert (stats["calls"], stats["server_ops"], stats["events"]) == (4, 8, 12)
    by_func = {r["func"]: r for r in stats["fanout_by_func"]}
    assert by_func["MPI_File_read_at"] == {
        "func": "MPI_File_read_at", "calls": 1, "disk_ops_min": 3, "disk_ops_mean": 3.0, "disk_ops_max": 3,
        "servers_min": 2, "servers_mean": 2.0, "servers_max": 2, "bytes_requested": 200, "own_bytes": 190,
        "share_bytes": 190,
        "inexact_arrows": 0}
    assert sorted(by_func) == ["MPI_File_get_size", "MPI_File_read_at", "MPI_File_seek", "MPI_File_write_at"]
    assert stats["bytes_per_server"] == [
        {"server": "io0", "ops": 2, "bytes_read": 0, "bytes_written": 200, "unattributed": 0},
        {"server": "io1", "ops": 3, "bytes_read": 200, "bytes_written": 100, "unattributed": 1},
        {"server": "meta0", "ops": 1, "bytes_read": 0, "bytes_written": 0, "unattributed": 0}]
    assert stats["fanin"] == {"shared_disk_ops": 1, "max_calls_per_disk_op": 2, "mean_calls_per_disk_op": 1.2}
    assert stats["aggregators"] == [0]  # rank 0 sent the request carrying rank 1's CallID
    # time: every call lasts 100 ns; write_at moved 300 bytes in them (2861 MiB/s)
    assert stats["time_by_func"][0] == {"func": "MPI_File_get_size", "calls": 1, "total_ns": 100,
                                        "mean_ns": 100, "p95_ns": 100, "max_ns": 100, "bytes": 0,
                                        "mib_per_s": None}
    assert {r["func"]: r["mib_per_s"] for r in stats["time_by_func"]}["MPI_File_write_at"] == 2861.0
    assert stats["time_by_rank"] == [{"rank": 0, "calls": 1, "io_ns": 100, "bytes": 300},
                                     {"rank": 1, "calls": 3, "io_ns": 300, "bytes": 200}]
    assert stats["rank_imbalance"] == {"io_time": 1.5, "bytes": 1.2}
    # busy: the union of the disk operations (io0: 1010-1020 and 1020-1030; io1: 1110-1140)
    assert stats["servers"] == [{"server": "io0", "ops": 2, "bytes": 200, "busy_ns": 20},
                                {"server": "io1", "ops": 3, "bytes": 300, "busy_ns": 30},
                                {"server": "meta0", "ops": 1, "bytes": 0, "busy_ns": 10}]
    assert stats["server_imbalance"] == {"ops": 1.2, "bytes": 1.2, "busy_time": 1.2}
    # A (1000-1100): its request (rank 0, req 1) is out 1001-1090; of that request's server events
    # (every one here says rank 0, req 1) those inside 1001-1090 count: the disk 1010-1030 (20 ns), the
    # queue from its arrival (1002) to its first disk operation (8 ns); the rest of the request is I/O
    # (89 - 28 = 61), 11 ns other.  B made no request: its disk operations are not its rank's waiting.
    assert [(r["func"], r["call_ns"], r["exchange_ns"], r["wait_ns"], r["io_ns"], r["server_queue_ns"],
             r["disk_ns"], r["other_ns"], r["accounted_pct"]) for r in stats["slowest_calls"]] == [
        ("MPI_File_write_at", 100, 0, 0, 61, 8, 20, 11, 89.0),
        ("MPI_File_read_at", 100, 0, 0, 0, 0, 0, 100, 0.0),
        ("MPI_File_seek", 100, 0, 0, 0, 0, 0, 100, 0.0), ("MPI_File_get_size", 100, 0, 0, 0, 0, 0, 100, 0.0)]
    json.dumps(stats)  # JSON-ready
    text = render_stats(stats)
    for figure in ("8 event categories carry CallIDs", "3 distinct CallIDs", "6 arrows",
                   "3.00 per CallID", "1 disk operations without a CallID", "Slowest calls",
                   "imbalance max/mean: time 1.5, bytes 1.2"):
        assert figure in text
    assert any(line.split()[:3] == ["io1", "3", "200"] for line in text.splitlines())


def test_statistics_of_logs_without_arrows(tmp_path):
    client = _write(tmp_path / "c.parquet", S.CLIENT_SCHEMA, [_call(NONE, 0, "MPI_File_open", 0, 1)],
                    S.KIND_CLIENT)
    server = _write(tmp_path / "s.parquet", S.SERVER_SCHEMA, [_op("io0", "meta", "create", [], 1, 0, 2)],
                    S.KIND_SERVER)
    merge(str(client), str(server), str(tmp_path / "m.duckdb"))
    stats = api.stats(tmp_path / "m.duckdb")
    assert (stats["arrows"], stats["avg_arrows_per_callid"], stats["distinct_callids"]) == (0, 0, 0)
    assert (stats["categories_with_callid"], stats["unattributed_server_ops"]) == (0, 1)
    assert "0 arrows" in render_stats(stats)


def test_query_formats(merged):
    cols, rows = sql_of(merged, "SELECT callid_hex, size FROM fanout WHERE callid IS NOT NULL "
                                        "ORDER BY callid")
    assert json.loads(format_rows(cols, rows, "json")) == [
        {"callid_hex": "0x00_000001", "size": 300}, {"callid_hex": "0x01_000001", "size": 200},
        {"callid_hex": "0x01_000002", "size": 0}]
    assert format_rows(cols, rows, "csv").splitlines() == [
        "callid_hex,size", "0x00_000001,300", "0x01_000001,200", "0x01_000002,0"]
    assert format_rows(cols, rows, "markdown").splitlines() == [
        "| callid_hex  | size |", "|-------------|------|", "| 0x00_000001 | 300  |",
        "| 0x01_000001 | 200  |", "| 0x01_000002 | 0    |"]
    assert format_rows(cols, rows, "table").splitlines() == [
        "callid_hex   size", "-----------  ----", "0x00_000001   300", "0x01_000001   200",
        "0x01_000002     0", "(3 rows)"]
    assert format_rows(["a|b"], [("x|y",)], "markdown").splitlines()[2] == "| x\\|y |"
    cols, rows = sql_of(merged, "SELECT callid, bytes_per_server FROM fanout WHERE callid = 1")
    assert json.loads(format_rows(cols, rows, "json")) == [
        {"callid": 1, "bytes_per_server": [{"server": "io0", "ops": 2, "share_bytes": 200, "own_bytes": 200},
                                           {"server": "io1", "ops": 1, "share_bytes": 60, "own_bytes": 60}]}]
    assert format_rows(["n", "m"], [(None, 1)], "csv") == "n,m\n,1"
    # integers a double cannot hold (64-bit CallIDs, times in ns) are strings in JSON, exactly
    big = (1 << 63) + 3
    row = (big, -(2**53) - 1, 2**53, True)
    assert json.loads(format_rows(["callid", "t", "n", "ok"], [row], "json")) == [
        {"callid": str(big), "t": str(-(2**53) - 1), "n": 2**53, "ok": True}]


def test_tables_for_people_cut_wide_values_and_lists_of_ranks_are_runs():
    table = format_rows(["key", "value"], [("config", "x" * 500), ("two", "a\nb")], "table").splitlines()
    assert table[2] == "config  " + "x" * 22 + "…456 chars more…" + "x" * 22 and table[3] == "two     a b"
    assert max(map(len, table)) == len("config  ") + 60
    # two paths that differ at their end stay apart, and say what is left out
    paths = [(f"/pvfs2/tmp/ompi.sn362.28751/jf.47773/{rank}/output/step-000123/test.out.{rank:04d}",)
             for rank in (1, 2)]
    one, two = format_rows(["file"], paths, "table").splitlines()[2:4]
    assert one != two and one.endswith("test.out.0001") and "chars more" in one and len(one) == 60
    assert format_rows(["v"], [("x" * 500,)], "table", cut=False).splitlines()[2] == "x" * 500
    assert format_rows(["v"], [("x" * 500,)], "csv").splitlines()[1] == "x" * 500  # (programs get it all)
    assert ranks_text(list(range(170))) == "0-169 (170 ranks)"
    assert ranks_text([9, 0, 2, 3, 4, 7, 8]) == "0, 2-4, 7-9 (7 ranks)"
    assert (ranks_text([5]), ranks_text([])) == ("5 (1 rank)", "none")


def test_query_errors_are_one_line_input_errors(merged, logs, tmp_path):
    with pytest.raises(InputError, match=r"^SQL error: Binder Error: .*nope") as err:
        sql_of(merged, "SELECT nope FROM calls")
    assert "\n" not in str(err.value)
    with pytest.raises(InputError, match="refused: callid sql runs queries only.*not DELETE"):
        sql_of(merged, "DELETE FROM calls")  # read-only
    assert query(merged, "SELECT count(*) FROM calls") == [(4,)]
    with pytest.raises(InputError, match="unknown format"):
        format_rows(["a"], [], "xml")


def test_sql_prints_rows_as_it_reads_them_and_stops_a_query_past_its_timeout(merged):
    n = 2 * BATCH_ROWS + 5
    with open_merged(merged, sandbox=True) as m:
        columns, batches = stream_query(m, f"SELECT range + 100000 AS i, 'x' || i AS s FROM range({n})")
        batches = list(batches)
        assert columns == ["i", "s"] and [len(b) for b in batches] == [BATCH_ROWS, BATCH_ROWS, 5]
        rows = [r for b in batches for r in b]
        for fmt in RowFormat:  # (in blocks, one per batch: what format_rows prints whole; JSON split
            whole = format_rows(columns, rows, fmt)  # between rows)
            streamed = "\n".join(stream_rows(columns, batches, fmt))
            assert (json.loads(streamed) == json.loads(whole)) if fmt == RowFormat.JSON else streamed == whole
    forever = "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t"
    result = callid_cmd("sql", merged, forever, "--timeout", "1s")
    assert (result.returncode, result.stdout, result.stderr) == (
        2, "", "callid: error: stopped after 1 s (--timeout)\n")
    result = callid_cmd("sql", merged, "SELECT 1", "--timeout", "99999999999999999999h")  # (overflowed)
    assert (result.returncode, result.stderr) == (
        2, "callid: error: --timeout: 3.6e+23 s is not between 0 (never) and 2592000 s (30 days)\n")
    result = callid_cmd("sql", merged, "SELECT * FROM range(25000)", "--format", "csv", "--timeout", "0")
    assert result.returncode == 0 and result.stdout.split() == ["range", *map(str, range(25000))]


@pytest.mark.slow
def test_sql_holds_a_batch_of_a_large_result_not_the_whole(merged):
    """A 220 MB result (2 M rows of 100 characters) printed in each format: the command's peak memory
    stays far below what the result takes whole (5 M rows, fetched whole, peaked at 3.3 GB)."""
    wide = "SELECT range AS i, repeat('x', 100) AS s FROM range(2000000)"
    measure = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
               "check=True); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    for fmt in RowFormat:
        result = subprocess.run([sys.executable, "-c", measure, CALLID, "sql", str(merged), wide, "--format",
                                 fmt], capture_output=True, text=True, timeout=300,
                                env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert result.returncode == 0, result.stderr
        assert int(result.stdout) < 300 << 10, fmt  # KiB


def test_stats_and_sql_refuse_what_is_not_a_merged_database(logs, tmp_path):
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE calls (x INT)")
    con.close()
    (tmp_path / "empty.duckdb").write_bytes(b"")
    earlier = tmp_path / "earlier.duckdb"  # (a merged output of a version before the table source_io)
    con = duckdb.connect(str(earlier))
    con.execute("CREATE TABLE calls (x INT); CREATE TABLE arrows (x INT); CREATE TABLE run (x INT)")
    con.close()
    cases = [(tmp_path / "none.duckdb", "none.duckdb: no such file"),
             (earlier, "earlier.duckdb: written by an earlier version of 'callid merge' (no table 'waits'): "
                       "merge its logs again"),
             (other, "other.duckdb: not a database written by 'callid merge' (no table 'waits')"),
             (logs[0], "client.parquet: not a database written by 'callid merge' (a Parquet file: "
                       "merge the logs with 'callid merge' first)"),
             (tmp_path / "empty.duckdb", "empty.duckdb: not a database written by 'callid merge' "
                                         "(not a DuckDB file)")]
    for db, message in cases:
        for call, args in ((api.stats, (db,)), (sql_of, (db, "SELECT 1"))):
            with pytest.raises(InputError) as err:
                call(*args)
            assert message in str(err.value) and "\n" not in str(err.value)


#: the tables a merge stores (the others are views over the logs it keeps)
STORED = {"calls", "waits", "mpi_calls", "nested_calls", "datatypes", "phases", "arrows", "fanout", "clocks",
          "run", "source_io"}


def test_the_logs_are_kept_beside_the_database_not_copied_into_it(logs, merged):
    data = Path(str(merged) + ".data")
    assert {p.name for p in data.iterdir()} == {f"{t}.parquet" for t in STORED - {"clocks", "run"}} | {
        "client", "server"}
    for log, kind in zip(logs, ("client", "server")):
        assert os.stat(data / kind / "000000.parquet").st_ino == os.stat(log).st_ino  # a hard link
    views = {name for (name,) in query(merged, "SELECT view_name FROM duckdb_views() WHERE NOT internal")}
    assert {"rpcs", "_rpcs", "server_ops", "_server_ops", "events", "arrows", "_arrows"} <= views
    assert {name for (name,) in query(merged, "SELECT table_name FROM duckdb_tables()")} == {"clocks", "run"}


def test_parquet_output_is_one_directory_of_the_same_tables(logs, merged, tmp_path):
    out = tmp_path / "tables"
    counts = merge(str(logs[0]), str(logs[1]), str(out), storage="parquet", memory_limit="256MB",
                   clock_sync="none")
    assert {p.name for p in out.iterdir()} == {f"{t}.parquet" for t in STORED} | {CATALOG, "client", "server"}
    assert set(counts) - STORED == {"rpcs", "server_ops"}  # views over the logs
    assert api.stats(out) == api.stats(merged)
    for table in ("rpcs", "server_ops"):  # views in the database: their CallID text is written out
        sql = f"SELECT callid, callid_hex FROM {table} ORDER BY ALL"
        assert sql_of(out, sql) == sql_of(merged, sql)
        assert any(hex_ for _, hex_ in sql_of(out, sql)[1])
    merge(str(logs[0]), str(logs[1]), str(out), storage="parquet")  # a previous output is replaced
    assert sql_of(out, "SELECT count(*) FROM arrows") == (["count_star()"], [(6,)])
    assert not list(tmp_path.glob(".*"))  # no temporary or spill directory left


@pytest.mark.parametrize("storage", ["duckdb", "parquet"])
def test_a_merged_output_moved_as_a_whole_keeps_working_without_the_logs(logs, tmp_path, storage):
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    name = "m.duckdb" if storage == "duckdb" else "m"
    merge(str(logs[0]), str(logs[1]), str(here / name), storage=storage)
    sql = "SELECT server, count(*), sum(size), min(t_start), max(t_end) FROM server_ops GROUP BY 1 ORDER BY 1"
    before = api.stats(here / name), sql_of(here / name, sql)
    here.rename(there)
    for log in logs:
        log.unlink()
    assert (api.stats(there / name), sql_of(there / name, sql)) == before
    if storage == "duckdb":  # the database alone is not the output
        (there / name).rename(tmp_path / "alone.duckdb")
        with pytest.raises(InputError, match=r"alone.duckdb: its logs and tables \(alone.duckdb.data/\) are "
                                             "missing"):
            api.stats(tmp_path / "alone.duckdb")


def test_times_are_the_same_whether_the_clock_mapping_is_inlined_or_joined(tmp_path, monkeypatch):
    synthesize(SynthOptions(ranks=4, servers=2, calls=400, skew="server:0=+250ms@15ppm~2ppm,server:1=-3ms",
                            duration=3600e9, seed=1), tmp_path)
    logs = str(tmp_path / "client.parquet"), str(tmp_path / "server.parquet")
    merge(*logs, str(tmp_path / "inline.duckdb"))
    monkeypatch.setattr(clocks, "INLINE_CLOCKS", 0)
    merge(*logs, str(tmp_path / "joined.duckdb"))
    windows = query(tmp_path / "inline.duckdb", "SELECT max(win) FROM clocks")[0][0]
    assert windows > 0  # (the wandering drift: several windows)
    for table in ("calls", "rpcs", "server_ops", "arrows", "events"):
        sql = f"SELECT * FROM {table} ORDER BY ALL"
        assert query(tmp_path / "inline.duckdb", sql) == query(tmp_path / "joined.duckdb", sql), table
    times = "SELECT min(t_start), max(t_end) FROM server_ops"
    assert query(tmp_path / "inline.duckdb", times) != query(tmp_path / "inline.duckdb", times.replace(
        "server_ops", "read_parquet('" + str(tmp_path / "server.parquet") + "')"))  # (the times did move)


def test_merge_reports_its_steps(logs, tmp_path):
    steps = []
    merge(str(logs[0]), str(logs[1]), str(tmp_path / "s.duckdb"), on_step=steps.append)
    assert steps == ["validate", "align clocks", "build tables", "derive arrows", "derive fan-out", "write"]


# --- bad input ----------------------------------------------------------------------------------


def _drop_column(src, dst, column):
    pq.write_table(pq.read_table(src).drop_columns([column]), dst)


def _retype_column(src, dst, column):
    table = pq.read_table(src)
    idx = table.schema.get_field_index(column)
    table = table.set_column(idx, pa.field(column, pa.string()), table.column(column).cast(pa.string()))
    pq.write_table(table, dst)


def _set_meta(src, dst, **changes):
    table = pq.read_table(src)
    meta = dict(table.schema.metadata)
    for key, value in changes.items():
        if value is None:
            meta.pop(key.encode(), None)
        else:
            meta[key.encode()] = value.encode()
    pq.write_table(table.replace_schema_metadata(meta), dst)


def _make_bad(case, bad, client, server):
    if case == "empty":
        bad.write_bytes(b"")
    elif case == "not_parquet":
        bad.write_text("callid,rank\n1,2\n")
    elif case == "truncated":
        data = client.read_bytes()
        bad.write_bytes(data[: len(data) // 2])
    elif case == "other_kind":
        bad.write_bytes(server.read_bytes())
    elif case == "missing_column":
        _drop_column(client, bad, "func")
    elif case == "wrong_type":
        _retype_column(client, bad, "rank")
    elif case == "no_kind":
        _set_meta(client, bad, **{S.META_KIND: None})
    elif case == "no_layout":
        _set_meta(client, bad, **{S.META_LAYOUT: None})
    elif case == "unknown_layout":
        _set_meta(client, bad, **{S.META_LAYOUT: "48/8"})
    elif case.startswith("flipped"):  # one bit of a data page, or of the footer's last string
        data = bytearray(client.read_bytes())
        data[200 if case == "flipped_page" else data.rfind(b"parquet-cpp-arrow")] ^= 1
        bad.write_bytes(data)


BAD_CLIENT = [
    ("missing", "client.bad.parquet: no such file"),
    ("empty", "client.bad.parquet: empty file, expected a client log"),
    ("not_parquet", "client.bad.parquet: not a Parquet file"),
    ("truncated", "client.bad.parquet: not a Parquet file"),
    ("other_kind", "client.bad.parquet: is a server log, expected a client log"),
    ("missing_column", "client.bad.parquet: missing column 'func'"),
    ("wrong_type", "client.bad.parquet: column 'rank' has type string, expected int32"),
    ("no_kind", "client.bad.parquet: not a callid log (no 'callid.kind' metadata)"),
    ("no_layout", "client.bad.parquet: no 'callid.layout' metadata"),
    ("unknown_layout", "client.bad.parquet: unknown CallID layout '48/8'"),
    ("flipped_page", "client.bad.parquet: damaged: its bytes do not match the checksum"),
    ("flipped_footer", "client.bad.parquet: damaged: its bytes do not match the checksum"),
]


@pytest.mark.parametrize("case, message", BAD_CLIENT, ids=[c for c, _ in BAD_CLIENT])
def test_bad_input_is_a_one_line_error_and_writes_nothing(logs, tmp_path, case, message):
    client, server = logs
    bad = tmp_path / "client.bad.parquet"
    _make_bad(case, bad, client, server)
    out = tmp_path / "out.duckdb"
    before = set(tmp_path.iterdir())
    with pytest.raises(InputError) as err:
        merge(str(bad), str(server), str(out))
    assert message in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith(str(bad))
    assert set(tmp_path.iterdir()) == before  # no output, no temporary left behind


def _with_value(src, dst, row, column, value):
    """``src`` with ``value`` in ``column`` of ``row`` (the schema made nullable, as another writer's
    may be), written to ``dst``."""
    table = pq.read_table(src)
    values = table.column(column).to_pylist()
    values[row] = value
    schema = pa.schema([f.with_nullable(True) for f in table.schema], metadata=table.schema.metadata)
    field = table.schema.field(column)
    table = table.set_column(table.schema.get_field_index(column), column, pa.array(values, field.type))
    table = table.cast(schema)
    pq.write_table(table, dst)


BAD_VALUES = [  # (log, row, column, value, what the error says after the file's name)
    ("client", 1, "func", None, "column 'func' is null in row 1"),
    ("client", 0, "size", -5, "column 'size' is negative in row 0 (-5)"),
    ("client", 2, "t_end", 1150, "column 't_end' is before 't_start' in row 2 (1150 < 1200)"),
    ("client", 3, "callid", B, f"column 'callid' repeats CallID {Layout.parse(LAYOUT).format(B)} in row 3 "
                               "(first in row 1)"),
    ("server", 2, "clock", None, "column 'clock' is null in row 2"),
    ("server", 6, "size", -1, "column 'size' is negative in row 6 (-1)"),
    ("server", 3, "t_start", 2000, "column 't_end' is before 't_start' in row 3 (1130 < 2000)"),
    ("server", 5, "event_id", 2, "column 'event_id' repeats event_id 2 of server io0 in row 5 "
                                 "(first in row 1)"),
]


@pytest.mark.parametrize("kind, row, column, value, says", BAD_VALUES,
                         ids=[f"{k}-{c}-{'null' if v is None else v}" for k, _, c, v, _ in BAD_VALUES])
def test_values_the_merge_relies_on_are_checked_first(logs, tmp_path, kind, row, column, value, says):
    bad = tmp_path / f"{kind}.bad.parquet"
    _with_value(logs[kind == "server"], bad, row, column, value)
    client, server = (bad, logs[1]) if kind == "client" else (logs[0], bad)
    before = set(tmp_path.iterdir())
    with pytest.raises(InputError) as err:
        merge(str(client), str(server), str(tmp_path / "out.duckdb"))
    assert str(err.value) == f"{bad}: {says}"
    assert set(tmp_path.iterdir()) == before  # nothing written


def test_a_failed_call_may_log_the_bad_size_it_was_given(logs, tmp_path):
    bad = tmp_path / "client.failed.parquet"
    _with_value(logs[0], tmp_path / "c1.parquet", 3, "size", -1)
    _with_value(tmp_path / "c1.parquet", bad, 3, "error", "MPI_ERR_ARG: negative size")
    assert merge(str(bad), str(logs[1]), str(tmp_path / "out.duckdb"))["calls"] == 4


def test_an_event_id_repeated_in_another_part_names_both_files(logs, tmp_path):
    parts = tmp_path / "server-parts-2"
    parts.mkdir()
    _write(parts / "a.parquet", S.SERVER_SCHEMA, SERVER_ROWS[:4], S.KIND_SERVER)
    _write(parts / "b.parquet", S.SERVER_SCHEMA, [SERVER_ROWS[5], SERVER_ROWS[0]], S.KIND_SERVER)
    with pytest.raises(InputError) as err:
        merge(str(logs[0]), str(parts), str(tmp_path / "out.duckdb"))
    assert str(err.value) == (f"{parts / 'b.parquet'}: column 'event_id' repeats event_id 1 of server io0 in "
                              f"row 1 (first in row 0 of {parts / 'a.parquet'})")


def test_command_line_reports_bad_values_in_one_line_with_exit_2(logs, tmp_path):
    bad = tmp_path / "server.bad.parquet"
    _with_value(logs[1], bad, 0, "size", -7)
    result = cli("merge", logs[0], bad, "-o", tmp_path / "out.duckdb")
    assert result.returncode == 2
    assert result.stderr.strip() == f"callid: error: {bad}: column 'size' is negative in row 0 (-7)"
    assert not (tmp_path / "out.duckdb").exists()


def test_parts_of_one_log_must_agree(logs, tmp_path):
    parts = tmp_path / "mixed"
    parts.mkdir()
    _write(parts / "a.parquet", S.SERVER_SCHEMA, SERVER_ROWS[:2], S.KIND_SERVER)
    _write(parts / "b.parquet", S.SERVER_SCHEMA, SERVER_ROWS[2:], S.KIND_SERVER, run_id="run2")
    with pytest.raises(InputError, match=r"b.parquet: 'callid.run_id' is 'run2' but 'run1' in .*a.parquet"):
        validate_log(str(parts / "*.parquet"), S.KIND_SERVER)
    (parts / "b.parquet").unlink()
    _write(parts / "b.parquet", S.SERVER_SCHEMA, SERVER_ROWS[2:], S.KIND_SERVER, layout="64/23")
    with pytest.raises(InputError, match=r"b.parquet: 'callid.layout' is '64/23' but '32/8'"):
        merge(str(logs[0]), str(parts / "*.parquet"), str(tmp_path / "x.duckdb"))
    assert not (tmp_path / "x.duckdb").exists()
    with pytest.raises(InputError, match="empty-dir: directory holds no .parquet files"):
        (tmp_path / "empty-dir").mkdir()
        validate_log(str(tmp_path / "empty-dir"), S.KIND_CLIENT)
    with pytest.raises(InputError, match=r"nothing\*.parquet: no file matches"):
        validate_log(str(tmp_path / "nothing*.parquet"), S.KIND_CLIENT)


def test_client_and_server_logs_must_be_of_one_run(logs, tmp_path):
    client, _ = logs
    other = _write(tmp_path / "other.parquet", S.SERVER_SCHEMA, SERVER_ROWS, S.KIND_SERVER, run_id="run2")
    with pytest.raises(InputError, match="other.parquet: run id 'run2' differs from the client log's 'run1'"):
        merge(str(client), str(other), str(tmp_path / "x.duckdb"))
    other64 = _write(tmp_path / "o64.parquet", S.SERVER_SCHEMA, SERVER_ROWS, S.KIND_SERVER, layout="64/23")
    with pytest.raises(InputError, match="o64.parquet: CallID layout 64/23 differs from the client log's"):
        merge(str(client), str(other64), str(tmp_path / "x.duckdb"))
    assert not (tmp_path / "x.duckdb").exists()


def test_outputs_that_must_not_be_written(logs, tmp_path):
    client, server = logs
    with pytest.raises(InputError, match="directory .*no-such-dir does not exist"):
        merge(str(client), str(server), str(tmp_path / "no-such-dir" / "m.duckdb"))
    with pytest.raises(InputError, match="is one of the input logs"):
        merge(str(client), str(server), str(client))
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "notes.txt").write_text("mine")
    for fmt in ("duckdb", "parquet"):
        with pytest.raises(InputError, match="is a directory that 'callid merge --storage parquet' did not"):
            merge(str(client), str(server), str(keep), storage=fmt)
    assert (keep / "notes.txt").read_text() == "mine"
    with pytest.raises(InputError, match="--memory-limit lots: .*not a size"):
        merge(str(client), str(server), str(tmp_path / "m.duckdb"), memory_limit="lots")
    assert not (tmp_path / "m.duckdb").exists()
    mine = tmp_path / "d.duckdb.data"  # where the output would keep its logs and tables
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match=r"d.duckdb.data: is not the data of a merged output"):
        merge(str(client), str(server), str(tmp_path / "d.duckdb"))
    assert (mine / "notes.txt").read_text() == "mine" and not (tmp_path / "d.duckdb").exists()
    merge(str(client), str(server), str(tmp_path / "m.duckdb"))
    kept = tmp_path / "m.duckdb.data"  # an output's logs, merged into that output again
    with pytest.raises(InputError, match="m.duckdb: holds the input log"):
        merge(str(kept / "client"), str(kept / "server"), str(tmp_path / "m.duckdb"))
    assert query(tmp_path / "m.duckdb", "SELECT count(*) FROM arrows") == [(6,)]
    assert not list(tmp_path.glob(".*"))


def test_a_failed_merge_keeps_the_previous_output(logs, tmp_path):
    client, server = logs
    out = tmp_path / "out.duckdb"
    merge(str(client), str(server), str(out))
    before = out.read_bytes(), sorted(p.name for p in Path(str(out) + ".data").iterdir())
    with pytest.raises(InputError):
        merge(str(server), str(server), str(out))
    assert (out.read_bytes(), sorted(p.name for p in Path(str(out) + ".data").iterdir())) == before
    merge(str(client), str(server), str(out))  # a successful merge replaces it
    assert query(out, "SELECT count(*) FROM arrows") == [(6,)]


@pytest.mark.parametrize("case, message", [BAD_CLIENT[0], BAD_CLIENT[4]])
def test_command_line_reports_bad_input_in_one_line_with_exit_2(logs, tmp_path, case, message):
    client, server = logs
    bad = tmp_path / "client.bad.parquet"
    _make_bad(case, bad, client, server)
    before = set(tmp_path.iterdir())
    result = cli("merge", bad, server, "-o", tmp_path / "out.duckdb")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("callid: error: ") and message in lines[0]
    assert set(tmp_path.iterdir()) == before


def test_the_handle_of_a_python_session(merged):
    """callid.open: tables as relations after an analysis left a result unread; a sandboxed handle
    locks the settings DuckDB shares among a process' handles on one file, and says so."""
    with open_merged(merged) as m:
        assert api.stats(m)["calls"] == m.calls.count("*").fetchall()[0][0] == 4
        assert api.insights(m) is api.insights(m) and m.arrows.to_arrow_table().num_rows == 6
        with pytest.raises(AttributeError, match="no table 'nope'"):
            m.table("nope")
    with open_merged(merged, sandbox=True):
        with pytest.raises(InputError, match="sandbox=True"):
            open_merged(merged)
    with open_merged(merged) as m:
        assert m.sql("SELECT count(*) FROM calls").fetchall() == [(4,)]


def test_compared_runs_show_times_in_ms_and_ratios_without_a_unit(merged):
    from pipeline.stats import render_comparison

    figures = api.stats(merged)
    table = render_comparison(["a", "b"], [figures, figures]).split("\n\n")[0].splitlines()[2:-1]
    labels = [ln.split()[0] for ln in table]
    assert "MPI_File_write_at.mean_ms" in labels and "server_imbalance.busy_time" in labels
    assert not [label for label in labels if label.endswith("_ns")]
    times = {r["func"]: r["mean_ns"] for r in figures["time_by_func"]}
    row = next(ln for ln in table if ln.startswith("MPI_File_write_at.mean_ms"))
    assert row.split()[1:] == [str(round(times["MPI_File_write_at"] / 1e6, 3))] * 2


def test_a_log_of_an_earlier_schema_says_so(logs, tmp_path):
    """A server log of schema 6 (no callid_own): the column it lacks, and that an earlier callid wrote it."""
    client, server = logs
    old = tmp_path / "server.parquet"
    _drop_column(server, old, "callid_own")
    _set_meta(old, old, **{S.META_SCHEMA_VERSION: "6"})
    with pytest.raises(InputError) as err:
        merge(str(client), str(old), str(tmp_path / "out.duckdb"))
    assert str(err.value) == (f"{old}: missing column 'callid_own' (written by an earlier callid: log "
                              f"schema 6, this one reads {S.SCHEMA_VERSION}; run or replay it again)")


def _hostile(merged: Path, secret: Path) -> None:
    """Make ``merged``'s view ``calls`` read ``secret`` into the function names (as a database someone
    sends you could)."""
    with duckdb.connect(str(merged)) as con:
        sql = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = 'calls'").fetchall()[0][0]
        con.execute(sql.replace("CREATE VIEW calls AS", "CREATE VIEW calls_0 AS", 1))
        con.execute(f"CREATE OR REPLACE VIEW calls AS SELECT * REPLACE ((SELECT content FROM "
                    f"read_text('{secret}')) AS func) FROM calls_0")


@pytest.mark.parametrize("command", [["stats"], ["check"], ["insights"], ["report", "-o", "out.html"],
                                     ["view", "-o", "out.html"], ["export", "-o", "out.json"],
                                     ["sql", "SELECT func FROM calls"]])
def test_a_database_whose_views_read_other_files_is_refused(merged, tmp_path, command):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-42\n")
    _hostile(merged, secret)
    result = (callid_cmd if command[0] == "sql" else cli)(command[0], merged, *command[1:], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"callid: error: {merged}: its table 'calls' reads a file that is not the output's own, refused "
        f"(Permission Error: Cannot access file \"{secret}\" - file system operations are disabled by "
        "configuration): open only outputs of callid merge")
    assert "TOP-SECRET" not in result.stdout and not (tmp_path / "out.html").exists()


def test_a_handle_reaches_its_files_and_its_scratch_directory_only(merged, tmp_path):
    (tmp_path / "other.csv").write_text("a\n1\n")
    with open_merged(merged) as m:
        scratch = m.scratch
        assert scratch.is_dir() and scratch.stat().st_mode & 0o777 == 0o700
        with pytest.raises(duckdb.PermissionException):
            m.sql(f"SELECT * FROM read_csv('{tmp_path / 'other.csv'}')").fetchall()
        with pytest.raises(duckdb.PermissionException):
            m.sql(f"COPY (SELECT 1) TO '{tmp_path / 'x.csv'}'").fetchall()
        m.sql(f"COPY (SELECT 1 AS x) TO '{scratch / 'x.csv'}'").fetchall()  # (its own scratch)
        with open_merged(merged) as again:  # (a second handle shares the first one's settings)
            assert again.scratch == scratch and again.sql("SELECT count(*) FROM calls").fetchall() == [(4,)]
        assert scratch.is_dir()
    assert not scratch.exists()
