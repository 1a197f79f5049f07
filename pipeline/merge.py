"""Merge: client + server logs -> one DuckDB database of calls, server operations and arrows.

The chain of steps is load -> validate -> align clocks -> build tables -> derive
arrows and fan-out.  Everything relational runs in DuckDB SQL straight from the
Parquet files (hash joins, out of core), never as Python loops over rows.  The
database is written under a temporary name and renamed only on success.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import duckdb

from pipeline import schema as S
from pipeline.errors import InputError
from pipeline.load import LogInfo, validate_log

TABLES = ("calls", "rpcs", "server_ops", "arrows", "fanout", "clocks", "run")
FORMATS = ("duckdb", "parquet")


def default_memory_limit() -> str:
    """Half of this machine's memory: DuckDB spills to disk beyond it."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return "4GB"
    return f"{max(total // 2 // 2**20, 256)}MB"
_DISK_LAYERS = ", ".join(f"'{layer}'" for layer in S.DISK_LAYERS)


def merge(client: str, server: str, out: str, *, memory_limit: str | None = None, fmt: str = "duckdb",
          on_step: Callable[[str], None] | None = None) -> dict:
    """Validate both logs, build the merged tables at ``out``; return the row count per table.

    ``fmt='parquet'`` writes ``out`` as a directory with one Parquet file per table.
    DuckDB spills to a temporary directory beyond ``memory_limit`` (default: half the RAM).
    ``on_step`` is called with the name of each step as it starts (for progress displays).
    """
    step = on_step or (lambda name: None)
    if fmt not in FORMATS:
        raise InputError(f"unknown output format {fmt!r}: choose duckdb or parquet")
    step("validate")
    c = validate_log(client, S.KIND_CLIENT)
    s = validate_log(server, S.KIND_SERVER)
    if c.layout != s.layout:
        raise InputError(f"{server}: CallID layout {s.layout} differs from the client log's {c.layout}")
    out_path = Path(out)
    tmp = out_path.with_name(f".{out_path.name}.{os.getpid()}.tmp")
    _remove(tmp)
    con = duckdb.connect(str(tmp) if fmt == "duckdb" else ":memory:")
    try:
        con.execute("SET enable_progress_bar = false")  # progress is the caller's (on_step)
        con.execute(f"SET memory_limit = '{memory_limit or default_memory_limit()}'")
        con.execute(f"SET temp_directory = '{tmp}.spill'")
        _sources(con, c, s)
        for name, fn in (("align clocks", align_clocks), ("build tables", build_tables),
                         ("derive arrows", derive_arrows), ("derive fan-out", derive_fanout)):
            step(name)
            fn(con)
        write_run(con, c, s)
        step("write")
        counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in TABLES}
        if fmt == "parquet":
            tmp.mkdir()
            for table in (*TABLES, "events"):
                con.execute(f"COPY {table} TO '{tmp / (table + '.parquet')}' (FORMAT parquet)")
        con.close()
        _remove(out_path)
        os.replace(tmp, out_path)
    except duckdb.Error as exc:
        con.close()
        _remove(tmp)
        raise InputError(f"merge failed: {str(exc).splitlines()[0]}") from None
    except BaseException:
        con.close()
        _remove(tmp)
        raise
    return counts


def _remove(path: Path) -> None:
    for p in (path, Path(str(path) + ".wal"), Path(str(path) + ".spill")):
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def _files(info: LogInfo) -> str:
    return "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in info.files) + "]"


def _sources(con: duckdb.DuckDBPyConnection, c: LogInfo, s: LogInfo) -> None:
    """Views over the Parquet files, and the CallID constants of the run's layout."""
    con.execute(f"CREATE TEMP VIEW client_log AS SELECT * FROM read_parquet({_files(c)})")
    con.execute(f"CREATE TEMP VIEW server_log AS SELECT * FROM read_parquet({_files(s)})")
    counter_bits = c.total_bits - c.rank_bits
    sentinel = (1 << c.total_bits) - 1
    rank_w, counter_w = -(-c.rank_bits // 4), -(-counter_bits // 4)
    # callid_hex(id) prints a CallID as callid.ids.Layout.format does; kept in the database.
    con.execute(
        f"CREATE MACRO callid_hex(id) AS CASE WHEN id IS NULL THEN NULL ELSE "
        f"printf('0x%0{rank_w}x_%0{counter_w}x', id >> {counter_bits}, "
        f"id & {(1 << counter_bits) - 1}::UBIGINT) END"
    )
    con.execute(f"CREATE TEMP MACRO no_callid() AS {sentinel}::UBIGINT")


def align_clocks(con: duckdb.DuckDBPyConnection) -> None:
    """Map every clock domain onto the reference clock.

    Identity for now (every process of a run reads one machine's clock); the
    ``clocks`` table records what was applied so later steps can use any model.
    """
    con.execute("""
        CREATE TABLE clocks AS
        SELECT clock, min(source) AS source, 0::BIGINT AS offset_ns, 0.0::DOUBLE AS drift_ppm,
               NULL::BIGINT AS bound_ns, 'identity' AS method
        FROM (SELECT DISTINCT clock, 'client' AS source FROM client_log
              UNION ALL SELECT DISTINCT clock, 'server' AS source FROM server_log)
        GROUP BY clock ORDER BY clock
    """)


def build_tables(con: duckdb.DuckDBPyConnection) -> None:
    """``calls``, ``rpcs`` and ``server_ops``: the logs with CallIDs made NULL where absent."""
    con.execute("""
        CREATE TABLE calls AS
        SELECT NULLIF(callid, no_callid()) AS callid, callid_hex(NULLIF(callid, no_callid())) AS callid_hex,
               rank, clock, func, file, fid, "offset", size, count, datatype, bytes, collective,
               coll_seq, rid, t_start, t_end, error
        FROM client_log WHERE kind = 'call' ORDER BY t_start
    """)
    con.execute("""
        CREATE TABLE rpcs AS
        SELECT NULLIF(callid, no_callid()) AS callid, callid_hex(NULLIF(callid, no_callid())) AS callid_hex,
               rank, clock, func, server, op, req_seq, t_start, t_end, t_recv, t_send, error
        FROM client_log WHERE kind = 'rpc' ORDER BY t_start
    """)
    con.execute("""
        CREATE TABLE server_ops AS
        SELECT server, clock, layer, op, NULLIF(callid, no_callid()) AS callid,
               callid_hex(NULLIF(callid, no_callid())) AS callid_hex,
               list_filter(callids, lambda x: x <> no_callid()) AS callids,
               rank, req_id, event_id, parent, handle, "offset", size, t_start, t_end
        FROM server_log
    """)
    con.execute("""
        CREATE VIEW events AS
        SELECT 'client' AS source, 'rank ' || rank AS lane, 'mpi' AS layer, func AS name,
               callid, callid_hex, t_start, t_end, size FROM calls
        UNION ALL
        SELECT 'client', 'rank ' || rank, 'rpc', op, callid, callid_hex, t_start, t_end, NULL FROM rpcs
        UNION ALL
        SELECT 'server', server, layer, op, callid, callid_hex, t_start, t_end, size FROM server_ops
    """)


def derive_arrows(con: duckdb.DuckDBPyConnection) -> None:
    """One row per (call, disk operation): unnest each operation's CallIDs, hash-join the calls."""
    con.execute(f"""
        CREATE TABLE arrows AS
        WITH links AS (
            SELECT unnest(callids) AS callid, len(callids) AS n_callids, server, layer, op, handle,
                   "offset", size, t_start, t_end, event_id
            FROM server_ops WHERE layer IN ({_DISK_LAYERS}) AND len(callids) > 0
        )
        SELECT l.callid, callid_hex(l.callid) AS callid_hex, c.rank, c.func, c.file,
               c.t_start AS call_t_start, c.t_end AS call_t_end, l.server, l.layer, l.op,
               l.handle, l."offset", l.size, l.t_start, l.t_end, l.event_id, l.n_callids
        FROM links l JOIN calls c ON c.callid = l.callid
    """)


def derive_fanout(con: duckdb.DuckDBPyConnection) -> None:
    """Per call: disk operations, servers touched, bytes in total and per server."""
    con.execute("""
        CREATE TABLE fanout AS
        WITH per_server AS (
            SELECT callid, server, count(*) AS ops, sum(size) AS bytes FROM arrows GROUP BY ALL
        ), per_call AS (
            SELECT callid, sum(ops)::BIGINT AS disk_ops, count(*)::BIGINT AS servers,
                   sum(bytes)::BIGINT AS disk_bytes,
                   list({'server': server, 'ops': ops, 'bytes': bytes::BIGINT} ORDER BY server)
                       AS bytes_per_server
            FROM per_server GROUP BY callid
        )
        SELECT c.callid, c.callid_hex, c.rank, c.func, c.size,
               coalesce(p.disk_ops, 0) AS disk_ops, coalesce(p.servers, 0) AS servers,
               coalesce(p.disk_bytes, 0) AS disk_bytes, p.bytes_per_server
        FROM calls c LEFT JOIN per_call p ON p.callid = c.callid
    """)


def write_run(con: duckdb.DuckDBPyConnection, c: LogInfo, s: LogInfo) -> None:
    """The ``run`` table: key/value metadata of both logs."""
    rows = [
        ("layout", c.layout), ("sentinel", str((1 << c.total_bits) - 1)),
        ("client.run_id", c.run_id), ("server.run_id", s.run_id),
        ("client.files", str(len(c.files))), ("server.files", str(len(s.files))),
        ("client.rows", str(c.rows)), ("server.rows", str(s.rows)),
        ("client.config", c.config), ("server.config", s.config),
        ("schema_version", S.SCHEMA_VERSION),
    ]
    con.execute("CREATE TABLE run (key VARCHAR, value VARCHAR)")
    con.executemany("INSERT INTO run VALUES (?, ?)", rows)
