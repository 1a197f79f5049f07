"""Merge: client + server logs -> one DuckDB database of calls, server operations and arrows.

The chain of steps is validate -> align clocks -> build tables -> derive arrows ->
derive fan-out -> write.  Everything relational runs in DuckDB SQL straight from
the Parquet files (hash joins, out of core), never as Python loops over rows.  The
output is written under a temporary name next to ``out`` and renamed only on success.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

import duckdb
import pyarrow as pa

from callid_core import atomic
from callid_core import schema as S
from callid_core.choices import ClockSync, Storage, listed
from callid_core.errors import Failed, InputError
from callid_core.schema import Table
from callid_core.tables import (
    ARROWS,
    CALLS,
    DERIVED,
    FANOUT,
    MERGED,
    MPI_CALLS,
    PHASES,
    RPCS,
    SERVER_OPS,
    WAITS,
)
from pipeline import clocks
from pipeline.load import LogInfo, check_values, validate_log

VIEWS = ("events",)
TABLES = tuple(name for name in MERGED if name not in VIEWS)


def default_memory_limit() -> str:
    """Half of this machine's memory: DuckDB spills to disk beyond it."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return "4GB"
    return f"{max(total // 2 // 2**20, 256)}MB"


def merge(client: str, server: str, out: str, *, memory_limit: str | None = None, storage: str = "duckdb",
          clock_sync: str = "drift", on_step: Callable[[str], None] | None = None) -> dict:
    """Validate both logs, build the merged tables at ``out``; return the row count per table.

    ``storage='parquet'`` writes ``out`` as a directory with one Parquet file per table.
    DuckDB spills to a temporary directory beyond ``memory_limit`` (default: half the RAM).
    ``clock_sync`` is the clock model: ``none``, ``offset`` or ``drift`` (see :mod:`pipeline.clocks`).
    ``on_step`` is called with the name of each step as it starts (for progress displays).
    Bad input or an unwritable output raises :class:`InputError`; then nothing is written.
    """
    step = on_step or (lambda name: None)
    if storage not in set(Storage):
        raise InputError(f"unknown output storage {storage!r}: choose {listed(Storage)}")
    if clock_sync not in set(ClockSync):
        raise InputError(f"unknown clock model {clock_sync!r}: choose {listed(ClockSync)}")
    step("validate")
    c = validate_log(client, S.KIND_CLIENT)
    s = validate_log(server, S.KIND_SERVER)
    if c.layout != s.layout:
        raise InputError(f"{server}: CallID layout {s.layout} differs from the client log's {c.layout}")
    if c.run_id != s.run_id:
        raise InputError(f"{server}: run id {s.run_id!r} differs from the client log's {c.run_id!r} "
                         "(logs of different runs would link unrelated CallIDs)")
    out_path = Path(out)
    _check_output(out_path, storage, [*c.files, *s.files])
    tmp = atomic.temporary(out_path)
    _remove(tmp)
    con = None
    try:
        con = duckdb.connect(str(tmp) if storage == "duckdb" else ":memory:")
        con.execute("SET enable_progress_bar = false")  # progress is the caller's (on_step)
        con.execute(f"SET memory_limit = {_literal(memory_limit or default_memory_limit())}")
        con.execute(f"SET temp_directory = {_literal(str(tmp) + '.spill')}")
        check_values(con, c)
        check_values(con, s)
        sources(con, c, s)
        step("align clocks")
        align_clocks(con, clock_sync)
        for name, fn in (("build tables", build_tables),
                         ("derive arrows", derive_arrows), ("derive fan-out", derive_fanout)):
            step(name)
            fn(con)
        write_run(con, c, s, clock_sync)
        check_tables(con)
        step("write")
        counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in TABLES}
        if storage == "parquet":
            tmp.mkdir()
            for table in (*TABLES, *VIEWS):
                con.execute(f"COPY {table} TO {_literal(str(tmp / (table + '.parquet')))} (FORMAT parquet)")
        con.close()
        Path(str(out_path) + ".wal").unlink(missing_ok=True)  # a stale WAL would be replayed onto it
        atomic.install(tmp, out_path)
    except duckdb.Error as exc:
        raise InputError(f"merge failed: {str(exc).splitlines()[0]}") from None
    except OSError as exc:
        raise InputError(f"{out}: cannot write ({exc.strerror or exc})") from None
    finally:
        if con is not None:
            con.close()
        _remove(tmp)
    return counts


def duckdb_type(t: pa.DataType) -> str:
    """DuckDB's name of an Arrow type (as ``DESCRIBE`` prints it, without quotes)."""
    if pa.types.is_list(t):
        return duckdb_type(t.value_type) + "[]"
    if pa.types.is_struct(t):
        return "STRUCT(" + ", ".join(f"{f.name} {duckdb_type(f.type)}" for f in t) + ")"
    return _DUCKDB_TYPES[t]


_DUCKDB_TYPES = {pa.int32(): "INTEGER", pa.int64(): "BIGINT", pa.uint64(): "UBIGINT", pa.string(): "VARCHAR",
                 pa.bool_(): "BOOLEAN", pa.float64(): "DOUBLE"}


def check_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Every table and view has exactly the columns ``callid_core.tables`` declares (else a bug)."""
    for name, table in MERGED.items():
        found = [(n, t.replace('"', "")) for n, t, *_ in con.execute(f"DESCRIBE {name}").fetchall()]
        declared = [(c.name, duckdb_type(c.type)) for c in table.columns]
        if found != declared:
            diff = next(((f, d) for f, d in zip(found, declared) if f != d), (found, declared))
            raise Failed(f"merge: table {name} does not match its declaration in callid_core.tables "
                         f"(found {diff[0]}, declared {diff[1]})")


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _is_merge_output_dir(path: Path) -> bool:
    names = {p.name for p in path.iterdir()}
    return names <= {f"{t}.parquet" for t in (*TABLES, *VIEWS)}


def _check_output(out: Path, storage: str, inputs: Iterable[str]) -> None:
    """Refuse outputs that would destroy something other than a previous merge output."""
    if not out.parent.is_dir():
        raise InputError(f"{out}: directory {out.parent} does not exist")
    if out.exists() and any(out.resolve() == Path(f).resolve() for f in inputs):
        raise InputError(f"{out}: is one of the input logs; choose another output")
    if out.is_dir() and (storage == "duckdb" or not _is_merge_output_dir(out)):
        raise InputError(f"{out}: is a directory that 'callid merge --storage parquet' did not write")
    if out.exists() and not out.is_dir() and storage == "parquet":
        raise InputError(f"{out}: is a file; --storage parquet writes a directory")


def _remove(path: Path) -> None:
    for p in (path, Path(str(path) + ".wal"), Path(str(path) + ".spill")):
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def _files(info: LogInfo) -> str:
    return "[" + ", ".join(_literal(f) for f in info.files) + "]"


def sources(con: duckdb.DuckDBPyConnection, c: LogInfo, s: LogInfo) -> None:
    """Views over the Parquet files, and the CallID macros of the run's layout."""
    con.execute(f"CREATE TEMP VIEW client_log AS SELECT * FROM read_parquet({_files(c)})")
    con.execute(f"CREATE TEMP VIEW server_log AS SELECT * FROM read_parquet({_files(s)})")
    layout = c.callid_layout
    bits = layout.counter_bits
    (rank_w, counter_w), mask = layout.hex_digits, (1 << bits) - 1
    con.execute(f"CREATE TEMP MACRO no_callid() AS {layout.sentinel}::UBIGINT")
    con.execute(f"CREATE TEMP MACRO counter_mask() AS {mask}::UBIGINT")
    # callid_hex(id) prints a CallID as callid_core.ids.Layout.format does; kept in the database (the
    # rpcs and server_ops views use it), so it may not call the temporary macros above.
    con.execute(
        f"CREATE MACRO callid_hex(id) AS CASE WHEN id IS NULL THEN NULL ELSE "
        f"printf('0x%0{rank_w}x_%0{counter_w}x', id >> {bits}, id & {mask}::UBIGINT) END"
    )


def align_clocks(con: duckdb.DuckDBPyConnection, model: str = "drift") -> None:
    """Estimate every clock domain's mapping onto the reference clock: the ``clocks`` table."""
    clocks.align(con, model)


def _timed_source(source: str, times: dict[str, str], mode: str,
                  join: str = "") -> tuple[str, dict[str, str]]:
    """The ``FROM`` clause (``source`` as ``x``) and the expressions putting the time columns
    ``times`` (column -> its clock's expression) on the reference clock (``mode``: see
    :func:`pipeline.clocks.create_clock_map`)."""
    sql = f"FROM {source} x {join}"
    if mode == "identity":
        return sql, {col: f"x.{col}" for col in times}
    exprs: dict[str, str] = {}
    aliases: dict[str, str] = {}
    for col, clock in times.items():
        if mode == "windowed":  # each time finds its own window
            alias = f"m{len(exprs)}"
            sql += (f" ASOF LEFT JOIN clock_map {alias} ON {clock} = {alias}.clock"
                    f" AND x.{col} >= {alias}.t_from")
        elif clock not in aliases:  # one window per clock: one join per clock expression
            alias = aliases[clock] = f"m{len(aliases)}"
            sql += f" LEFT JOIN clock_map {alias} ON {clock} = {alias}.clock"
        else:
            alias = aliases[clock]
        exprs[col] = clocks.mapped(f"x.{col}", alias)
    return sql, exprs


def build_tables(con: duckdb.DuckDBPyConnection) -> None:
    """``calls``, ``waits``, ``mpi_calls``, ``rpcs``, ``phases``, ``server_ops`` (times on the reference
    clock; CallIDs NULL where absent), the run's start (macro ``run_start()``) and the ``events`` view."""
    mode = clocks.create_clock_map(con)
    callid = "NULLIF(x.callid, no_callid())"
    src, t = _timed_source("client_log", {"t_start": "x.clock", "t_end": "x.clock"}, mode)
    columns = _select(CALLS, t, callid=callid, counter=f"{callid} & counter_mask()", file_offset="x.offset")
    _store(con, CALLS, f"SELECT {columns} {src} WHERE x.kind = 'call' ORDER BY t_start")
    src, t = _timed_source(
        "client_log", {"t_start": "x.clock", "t_end": "x.clock", "t_recv": "sc.clock", "t_send": "sc.clock"},
        mode, "LEFT JOIN (SELECT server, any_value(clock) AS clock FROM server_log GROUP BY server) sc "
        "ON sc.server = x.server")
    # (a log that names no callids, e.g. a synthetic one: the one CallID of the callid column)
    callids = ("CASE WHEN len(x.callids) = 0 AND x.callid <> no_callid() THEN [x.callid] "
               "ELSE list_filter(x.callids, lambda v: v <> no_callid()) END")
    _store(con, RPCS, f"SELECT {_select(RPCS, t, callid=callid, callids=callids)} {src} "
                      "WHERE x.kind = 'rpc' ORDER BY t_start")
    src, t = _timed_source("client_log", {"t_start": "x.clock", "t_end": "x.clock"}, mode)
    _store(con, WAITS, f"SELECT {_select(WAITS, t, callid=callid)} {src} WHERE x.kind = 'wait' "
                       "ORDER BY t_start")
    _store(con, MPI_CALLS, f"SELECT {_select(MPI_CALLS, t)} {src} WHERE x.kind = 'mpi' ORDER BY t_start")
    columns = _select(PHASES, t, callid=callid, phase="x.op", file_offset="x.offset")
    _store(con, PHASES, f"SELECT {columns} {src} WHERE x.kind = 'phase' ORDER BY t_start")
    src, t = _timed_source("server_log", {"t_start": "x.clock", "t_end": "x.clock"}, mode)
    columns = _select(SERVER_OPS, t, callid=callid, disk_offset="x.offset",
                      callids="list_filter(x.callids, lambda v: v <> no_callid())",
                      # (aligned with callids: the unstamped left out of both)
                      callid_bytes="CASE WHEN len(x.callid_bytes) <> len(x.callids) THEN []::BIGINT[] "
                                   "WHEN list_contains(x.callids, no_callid()) THEN "
                                   "list_filter(x.callid_bytes, lambda b, i: x.callids[i] <> no_callid()) "
                                   "ELSE x.callid_bytes END",
                      file_offset="NULLIF(x.file_offset, -1)", file_end="NULLIF(x.file_end, -1)")
    _store(con, SERVER_OPS, f"SELECT {columns} {src}")
    start = con.execute("SELECT least((SELECT min(t_start) FROM _calls), (SELECT min(t_start) FROM _rpcs), "
                        "(SELECT min(t_start) FROM _server_ops))").fetchall()[0][0]
    con.execute(f"CREATE MACRO run_start() AS {int(start or 0)}::BIGINT")
    for table in (CALLS, WAITS, MPI_CALLS, RPCS, PHASES, SERVER_OPS):
        _show(con, table)
    con.execute(f"""
        CREATE VIEW events AS
        SELECT * EXCLUDE (size), {DERIVED['dur_ns']} AS dur_ns, {DERIVED['t_rel_ns']} AS t_rel_ns, size FROM (
            SELECT 'client' AS source, 'rank ' || rank AS lane, 'mpi' AS layer, func AS name,
                   callid, callid_hex, t_start, t_end, size FROM calls
            UNION ALL
            SELECT 'client', 'rank ' || rank, 'rpc', op, callid, callid_hex, t_start, t_end, NULL FROM rpcs
            UNION ALL
            SELECT 'server', server, layer, op, callid, callid_hex, t_start, t_end, size FROM server_ops
        )
    """)


def _stored(table: Table) -> list[str]:
    """The columns of ``table`` that are stored (in ``_name``): all but the :data:`DERIVED` ones."""
    return [c.name for c in table.columns if c.name not in DERIVED]


def _store(con: duckdb.DuckDBPyConnection, table: Table, select: str) -> None:
    """Table ``_name`` holds the stored columns of ``table``, the rows of ``select``."""
    con.execute(f"CREATE TABLE _{table.name} AS {select}")


def _show(con: duckdb.DuckDBPyConnection, table: Table) -> None:
    """View ``name`` shows ``_name`` with the derived columns (``callid_hex``, ``dur_ns``,
    ``t_rel_ns``), made when read: storing them for 10 M rows costs as much again as the copy."""
    shown = [f"{DERIVED[c.name]} AS {c.name}" if c.name in DERIVED else f'"{c.name}"' for c in table.columns]
    con.execute(f"CREATE VIEW {table.name} AS SELECT {', '.join(shown)} FROM _{table.name}")


def _select(table: Table, mapped: dict[str, str], **exprs: str) -> str:
    """The stored columns of ``table`` from source ``x``: times through ``mapped``, others by
    name unless ``exprs`` gives their expression."""
    def one(name: str) -> str:
        expr = exprs.get(name) or mapped.get(name) or f'x."{name}"'
        return f'{expr} AS "{name}"'
    return ", ".join(one(n) for n in _stored(table))


#: an operation's bytes per CallID, aligned with its CallIDs: as logged, none of an operation of size 0,
#: else unknown (NULL each: request-level attribution)
_OP_BYTES = ("CASE WHEN len(callid_bytes) = len(callids) THEN callid_bytes "
             "ELSE list_transform(callids, lambda v: CASE WHEN size = 0 THEN 0 END) END")


def derive_arrows(con: duckdb.DuckDBPyConnection) -> None:
    """One row per (call, disk operation) with the call's bytes of it: unnest each operation's
    CallIDs with their bytes, hash-join the calls.  An operation of one CallID is all its
    call's; a CallID listed twice is one arrow with the bytes of both."""
    con.execute(f"""
        CREATE TABLE _arrows AS
        WITH ops AS (
            SELECT callids, callid_bytes, server, layer, op, handle, disk_offset, file_offset, file_end,
                   size, t_start, t_end, event_id
            FROM _server_ops WHERE layer IN ({S.DISK_LAYERS_SQL}) AND len(callids) > 0
        ), links AS (
            -- one CallID (most operations): every byte is its call's
            SELECT callids[1] AS callid, size AS bytes, 1 AS n_callids, * EXCLUDE (callids, callid_bytes)
            FROM ops WHERE len(callids) = 1
            UNION ALL BY NAME
            -- several distinct CallIDs (fan-in): each with its bytes
            SELECT unnest(callids) AS callid, unnest({_OP_BYTES}) AS bytes, len(callids) AS n_callids,
                   * EXCLUDE (callids, callid_bytes)
            FROM ops WHERE len(callids) > 1 AND len(list_distinct(callids)) = len(callids)
            UNION ALL BY NAME
            -- a CallID listed more than once (not written by our servers): one link, the bytes summed
            SELECT CASE WHEN n_callids = 1 THEN size ELSE b END AS bytes, * EXCLUDE (b)
            FROM (SELECT CASE WHEN count(bytes) = count(*) THEN sum(bytes) END::BIGINT AS b,
                         * EXCLUDE (bytes)
                  FROM (SELECT unnest(callids) AS callid, unnest({_OP_BYTES}) AS bytes,
                               len(list_distinct(callids)) AS n_callids, * EXCLUDE (callids, callid_bytes)
                        FROM ops WHERE len(list_distinct(callids)) < len(callids))
                  GROUP BY ALL)
        )
        SELECT l.callid, c.rank, c.func, c.file,
               c.t_start AS call_t_start, c.t_end AS call_t_end, l.server, l.layer, l.op,
               l.handle, l.disk_offset, l.file_offset, l.file_end, l.size, l.bytes, l.t_start, l.t_end,
               l.event_id, l.n_callids, l.bytes IS NOT NULL AS exact
        FROM links l JOIN _calls c ON c.callid = l.callid
    """)
    _show(con, ARROWS)


def derive_fanout(con: duckdb.DuckDBPyConnection) -> None:
    """Per call: disk operations, servers touched, its bytes of them in total and per server
    (attributed bytes: over all calls each disk byte counts once), arrows without bytes."""
    con.execute("""
        CREATE TABLE _fanout AS
        WITH per_server AS (
            SELECT callid, server, count(*) AS ops, coalesce(sum(bytes), 0)::BIGINT AS bytes,
                   count(*) FILTER (WHERE NOT exact) AS inexact
            FROM _arrows GROUP BY ALL
        ), per_call AS (
            SELECT callid, sum(ops)::BIGINT AS disk_ops, count(*)::BIGINT AS servers,
                   sum(bytes)::BIGINT AS disk_bytes, sum(inexact)::BIGINT AS inexact_arrows,
                   -- (sorted afterwards, by server as it comes first: cheaper than an ordered aggregate)
                   list_sort(list({'server': server, 'ops': ops, 'bytes': bytes})) AS bytes_per_server
            FROM per_server GROUP BY callid
        )
        SELECT c.callid, c.rank, c.func, c.size,
               coalesce(p.disk_ops, 0) AS disk_ops, coalesce(p.servers, 0) AS servers,
               coalesce(p.disk_bytes, 0) AS disk_bytes, coalesce(p.inexact_arrows, 0) AS inexact_arrows,
               coalesce(p.bytes_per_server, []) AS bytes_per_server
        FROM _calls c LEFT JOIN per_call p ON p.callid = c.callid
        ORDER BY c.t_start
    """)
    _show(con, FANOUT)


def write_run(con: duckdb.DuckDBPyConnection, c: LogInfo, s: LogInfo, clock_sync: str) -> None:
    """The ``run`` table: both logs' metadata (``client.*``, ``server.*``), layout, sentinel and
    the clock model used."""
    start = con.execute("SELECT run_start()").fetchall()[0][0]
    rows = [("layout", c.layout), ("sentinel", str(c.callid_layout.sentinel)), ("clock_sync", clock_sync),
            ("start_ns", str(start))]
    for info in (c, s):
        meta = {**info.metadata, "files": str(len(info.files)), "rows": str(info.rows)}
        meta.pop("kind", None)
        rows += [(f"{info.kind}.{key}", value) for key, value in sorted(meta.items())]
    con.execute("CREATE TABLE run (key VARCHAR, value VARCHAR)")
    con.executemany("INSERT INTO run VALUES (?, ?)", rows)
