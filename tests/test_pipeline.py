"""The pipeline on small logs with known answers, and its handling of bad input."""

from __future__ import annotations

import json

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import schema as S
from pipeline.errors import InputError
from pipeline.logwriter import PartLog, combine_parts, file_metadata
from pipeline.merge import merge
from pipeline.query import format_rows, run_query
from pipeline.stats import compute_stats
from tests.conftest import callid_cmd

LAYOUT = "32/8"
NONE = 0xFFFFFFFF
A, B, C = 0x00000001, 0x01000001, 0x01000002  # rank 0 call 1, rank 1 calls 1 and 2


def _meta(kind: str) -> dict[bytes, bytes]:
    return file_metadata(kind, LAYOUT, "run1", "{}")


def _call(callid, rank, func, size, t0):
    return (callid, rank, "host0", "call", func, "/pvfs2/f", 1, 0, size, size, "MPI_BYTE", size,
            False, None, None, t0, t0 + 100, None, None, None, None, None, None)


def _op(server, layer, op, callids, event_id, size, t0):
    callid = callids[0] if len(callids) == 1 else NONE
    return (server, server, layer, op, callid, callids, 0, 1, event_id, -1, 5, 0, size, t0, t0 + 10)


CLIENT_ROWS = [
    _call(A, 0, "MPI_File_write_at", 300, 1000),
    _call(B, 1, "MPI_File_read_at", 200, 1100),
    _call(NONE, 1, "MPI_File_seek", 0, 1200),  # traced but not stamped
    _call(C, 1, "MPI_File_get_size", 0, 1300),  # stamped, caused nothing on disk
    (A, 0, "host0", "rpc", "MPI_File_write_at", None, None, None, None, None, None, None, None, None,
     None, 1001, 1090, None, "io0", "io", 1, 1010, 1080),
]
SERVER_ROWS = [
    _op("io0", "trove", "trove_write", [A], 1, 100, 1010),
    _op("io0", "trove", "trove_write", [A], 2, 100, 1020),
    _op("io1", "trove", "trove_read", [B], 3, 150, 1110),
    _op("io1", "trove", "trove_read", [], 4, 50, 1120),  # unattributed
    _op("io1", "trove", "trove_write", [A, B], 5, 100, 1130),  # one disk op, two calls (fan-in)
    _op("io0", "flow", "flow_write", [A], 6, 200, 1005),  # not a disk operation
    _op("meta0", "meta", "keyval_read", [B], 7, 0, 1105),
]


def _write(path, schema, rows, kind):
    log = PartLog(schema, path.parent / f"{path.stem}-parts", path.stem, _meta(kind))
    for row in rows:
        log.append(row)
    log.close()
    combine_parts(sorted((path.parent / f"{path.stem}-parts").glob("*.parquet")), path, schema, _meta(kind))
    return path


@pytest.fixture
def logs(tmp_path):
    client = _write(tmp_path / "client.parquet", S.CLIENT_SCHEMA, CLIENT_ROWS, S.KIND_CLIENT)
    server = _write(tmp_path / "server.parquet", S.SERVER_SCHEMA, SERVER_ROWS, S.KIND_SERVER)
    return client, server


@pytest.fixture
def merged(logs, tmp_path):
    db = tmp_path / "m.duckdb"
    merge(str(logs[0]), str(logs[1]), str(db))
    return db


def _q(db, sql):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_arrows_are_one_row_per_call_and_disk_operation_including_fan_in(merged):
    rows = _q(merged, "SELECT callid, event_id, server, op, n_callids FROM arrows ORDER BY callid, event_id")
    assert rows == [(A, 1, "io0", "trove_write", 1), (A, 2, "io0", "trove_write", 1),
                    (A, 5, "io1", "trove_write", 2),
                    (B, 3, "io1", "trove_read", 1), (B, 5, "io1", "trove_write", 2),
                    (B, 7, "meta0", "keyval_read", 1)]
    assert _q(merged, f"SELECT callid_hex FROM arrows WHERE callid = {B} LIMIT 1") == [("0x01_000001",)]


def test_fanout_counts_operations_servers_and_bytes_per_call(merged):
    rows = _q(merged, "SELECT callid, func, disk_ops, servers, disk_bytes, bytes_per_server FROM fanout "
                      "ORDER BY func")
    assert rows == [
        (C, "MPI_File_get_size", 0, 0, 0, None),
        (B, "MPI_File_read_at", 3, 2, 250,
         [{"server": "io1", "ops": 2, "bytes": 250}, {"server": "meta0", "ops": 1, "bytes": 0}]),
        (None, "MPI_File_seek", 0, 0, 0, None),
        (A, "MPI_File_write_at", 3, 2, 300,
         [{"server": "io0", "ops": 2, "bytes": 200}, {"server": "io1", "ops": 1, "bytes": 100}]),
    ]


def test_sentinel_becomes_null_and_tables_are_complete(merged):
    assert _q(merged, "SELECT count(*) FROM calls WHERE callid IS NULL") == [(1,)]
    assert _q(merged, "SELECT callids FROM server_ops WHERE event_id = 4") == [([],)]
    assert _q(merged, "SELECT server, op, t_recv, t_send FROM rpcs") == [("io0", "io", 1010, 1080)]
    assert _q(merged, "SELECT clock, source FROM clocks ORDER BY clock") == [
        ("host0", "client"), ("io0", "server"), ("io1", "server"), ("meta0", "server")]
    assert _q(merged, "SELECT count(*) FROM events") == [(len(CLIENT_ROWS) + len(SERVER_ROWS),)]
    assert ("layout", LAYOUT) in _q(merged, "SELECT key, value FROM run")


def test_statistics(merged):
    stats = compute_stats(str(merged))
    assert stats["distinct_callids"] == 3  # A, B and C; the unstamped seek has none
    assert stats["arrows"] == 6
    assert stats["avg_arrows_per_callid"] == 3.0  # 6 arrows over A and B
    assert stats["unattributed_server_ops"] == 1
    by_func = {r["func"]: r for r in stats["fanout_by_func"]}
    write = by_func["MPI_File_write_at"]
    assert (write["disk_ops_max"], write["servers_max"]) == (3, 2)
    per_server = {r["server"]: r for r in stats["bytes_per_server"]}
    assert per_server["io1"] == {"server": "io1", "disk_ops": 3, "bytes_read": 200, "bytes_written": 100,
                                 "unattributed": 1}


def test_directories_and_globs_of_parts_are_inputs(logs, tmp_path):
    db = tmp_path / "parts.duckdb"
    merge(str(tmp_path / "client-parts"), str(tmp_path / "server-parts" / "*.parquet"), str(db))
    assert _q(db, "SELECT count(*) FROM arrows") == [(6,)]


def test_query_formats(merged):
    cols, rows = run_query(str(merged), "SELECT callid_hex, size FROM fanout WHERE callid IS NOT NULL "
                                        "ORDER BY callid")
    assert json.loads(format_rows(cols, rows, "json")) == [
        {"callid_hex": "0x00_000001", "size": 300}, {"callid_hex": "0x01_000001", "size": 200},
        {"callid_hex": "0x01_000002", "size": 0}]
    assert format_rows(cols, rows, "csv").splitlines() == [
        "callid_hex,size", "0x00_000001,300", "0x01_000001,200", "0x01_000002,0"]
    assert format_rows(cols, rows, "markdown").splitlines()[:2] == [
        "| callid_hex  | size |", "|-------------|------|"]
    table = format_rows(cols, rows, "table").splitlines()
    assert table[0].split() == ["callid_hex", "size"] and table[-1] == "(3 rows)"
    with pytest.raises(InputError, match="SQL error"):
        run_query(str(merged), "SELECT nope FROM calls")


def _drop_column(src, dst, column):
    table = pq.read_table(src)
    pq.write_table(table.drop_columns([column]), dst)


def _retype_column(src, dst, column):
    table = pq.read_table(src)
    idx = table.schema.get_field_index(column)
    table = table.set_column(idx, pa.field(column, pa.string()), table.column(column).cast(pa.string()))
    pq.write_table(table, dst)


@pytest.mark.parametrize("case, message", [
    ("missing", "client.bad.parquet: no such file"),
    ("empty", "client.bad.parquet: empty file, expected a client log"),
    ("not_parquet", "client.bad.parquet: not a Parquet file"),
    ("other_kind", "client.bad.parquet: is a server log, expected a client log"),
    ("missing_column", "client.bad.parquet: missing column 'func'"),
    ("wrong_type", "client.bad.parquet: column 'rank' has type string, expected int32"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(logs, tmp_path, case, message):
    client, server = logs
    bad = tmp_path / "client.bad.parquet"
    if case == "empty":
        bad.write_bytes(b"")
    elif case == "not_parquet":
        bad.write_text("callid,rank\n1,2\n")
    elif case == "other_kind":
        bad.write_bytes(server.read_bytes())
    elif case == "missing_column":
        _drop_column(client, bad, "func")
    elif case == "wrong_type":
        _retype_column(client, bad, "rank")
    out = tmp_path / "out.duckdb"
    before = set(tmp_path.iterdir())
    result = callid_cmd("merge", bad, server, "-o", out)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("callid: error: ") and message in lines[0]
    assert "Traceback" not in result.stderr
    assert set(tmp_path.iterdir()) == before  # no output, no temporary left behind


def test_a_failed_merge_keeps_the_previous_output(logs, tmp_path):
    client, server = logs
    out = tmp_path / "out.duckdb"
    merge(str(client), str(server), str(out))
    before = out.read_bytes()
    with pytest.raises(InputError):
        merge(str(server), str(server), str(out))
    assert out.read_bytes() == before


def test_stats_and_sql_on_a_file_that_is_not_a_merged_database(logs, tmp_path):
    for args in (["stats", logs[0]], ["sql", logs[0], "SELECT 1"], ["stats", tmp_path / "none.duckdb"]):
        result = callid_cmd(*args)
        assert result.returncode == 2
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_parquet_output_is_a_directory_of_the_same_tables(logs, merged, tmp_path):
    out = tmp_path / "tables"
    counts = merge(str(logs[0]), str(logs[1]), str(out), fmt="parquet", memory_limit="256MB")
    assert sorted(p.stem for p in out.glob("*.parquet")) == sorted([*counts, "events"])
    assert compute_stats(str(out)) == compute_stats(str(merged))
    assert not list(tmp_path.glob(".*"))  # no temporary or spill directory left


def test_merge_reports_its_steps(logs, tmp_path):
    steps = []
    merge(str(logs[0]), str(logs[1]), str(tmp_path / "s.duckdb"), on_step=steps.append)
    assert steps == ["validate", "align clocks", "build tables", "derive arrows", "derive fan-out", "write"]
