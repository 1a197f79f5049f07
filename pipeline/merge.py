"""Merge: client + server logs -> calls, server operations, arrows, fan-out and clocks.

The chain of steps is validate -> align clocks -> build tables -> derive arrows ->
derive fan-out -> write.  Everything relational runs in DuckDB SQL straight from
the Parquet logs (hash joins, out of core), never as Python loops over rows.

The events stay where they are, columnar: a merged output keeps the logs themselves (hard
links, or copies on another file system) and its views put their times on the reference
clock when read (``rpcs``, ``server_ops``, ``events``).  Only what is derived is stored, as
Parquet: the client's tables (``calls``, ``waits``, ``mpi_calls``, ``nested_calls``, ``datatypes``,
``phases``), ``arrows`` and ``fanout``; and ``clocks`` and ``run``.  (Rewriting every event into
DuckDB's storage cost more than the rest of the merge; Parquet takes a third less time to write
than a DuckDB table and reads as fast.)  The layout of an output, and how readers open it:
:mod:`pipeline.merged`.  Outputs are written under temporary names and renamed only on success.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

import duckdb

from callid_core import atomic
from callid_core import schema as S
from callid_core.choices import ClockSync, Storage, listed
from callid_core.choices import Engine as EngineChoice
from callid_core.errors import BadValue, Failed, InputError, os_reason
from callid_core.schema import Column, Table
from callid_core.tables import (
    ARROWS,
    CALLS,
    CLOCKS,
    DATATYPES,
    DERIVED,
    FANOUT,
    MERGED,
    MPI_CALLS,
    NESTED_CALLS,
    PHASES,
    RPCS,
    RUN,
    SERVER_OPS,
    SOURCE_IO,
    WAITS,
)
from callid_core.units import parse_size
from pipeline import clocks
from pipeline.dialect import DUCKDB, Dialect, literal
from pipeline.load import LogInfo, check_values, validate_log
from pipeline.merged import CATALOG, DIR_VARIABLE, LOG_DIRS, TABLES, VIEWS, data_dir

T = TypeVar("T")

#: the longest description of a run ``callid merge --description`` keeps (bytes)
MAX_DESCRIPTION = 64 << 10


def _ram() -> int | None:
    """This machine's memory in bytes (None if the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def default_memory_limit() -> str:
    """Half of this machine's memory: DuckDB spills to disk beyond it."""
    total = _ram()
    return f"{max(total // 2 // 2**20, 256)}MB" if total else "4GB"


#: bytes of a column's dictionary in a row group beyond which the column is written without one
DICTIONARY_BYTES = 4096


@dataclass(frozen=True)
class _Target:
    """Where a merge writes its files: the data directory it fills now (a temporary one), and the
    one the views name when no ``callid_dir`` is set (where it will be)."""

    data: Path
    final: Path

    def file_sql(self, *names: str) -> str:
        """SQL reading the Parquet files ``names`` of the data directory, wherever the output is when
        read.  (Named one by one: a reader confined to the output's files may not list a directory.)"""
        where = f"coalesce(getvariable('{DIR_VARIABLE}'), {literal(str(self.final))})"
        return "read_parquet([" + ", ".join(f"{where} || '/{name}'" for name in names) + "])"

    def copy(self, con: duckdb.DuckDBPyConnection, select: str, name: str) -> None:
        """Write the rows of ``select`` to ``name.parquet`` in the data directory (Parquet 2: its
        encodings make the file a third smaller, and it reads as fast; a dictionary only for a column
        of few values: ids and times are smaller delta-encoded, and the arrows of the scale check are
        written in 0.7 s instead of 1.1 s, a quarter smaller)."""
        file = literal(str(self.data / f"{name}.parquet"))
        con.execute(f"COPY ({select}) TO {file} (FORMAT parquet, PARQUET_VERSION v2, "
                    f"DICTIONARY_SIZE_LIMIT {DICTIONARY_BYTES})")


def merge(client: str, server: str, out: str, *, memory_limit: str | None = None, storage: str = "duckdb",
          clock_sync: str = "drift", on_step: Callable[[str], None] | None = None, engine: str = "duckdb",
          master: str | None = None, description: str = "") -> dict:
    """Validate both logs, write the merged output at ``out``; return the row count per table.

    ``storage='parquet'`` writes ``out`` as a directory (see the module's doc for both layouts).
    DuckDB spills to a temporary directory beyond ``memory_limit`` (default: half the RAM).
    ``clock_sync`` is the clock model: ``none``, ``offset`` or ``drift`` (see :mod:`pipeline.clocks`).
    ``engine='spark'`` runs the steps' SQL on Apache Spark (``master``: its URL, default local mode;
    ``memory_limit``: the driver's memory), see :mod:`pipeline.spark`; the views are DuckDB's either way.
    ``on_step`` is called with the name of each step as it starts (for progress displays).
    ``description``: what the user says of the run, kept in the run table (``description``).
    Bad input or an unwritable output raises :class:`InputError`; then nothing is written.
    """
    step = on_step or (lambda name: None)
    _check_choices(storage, clock_sync, engine, master)
    if len(description.encode()) > MAX_DESCRIPTION:
        raise InputError(f"--description: longer than {MAX_DESCRIPTION >> 10} KiB")
    if memory_limit is not None and engine != EngineChoice.SPARK:  # (Spark's: its driver's, maybe elsewhere)
        _check_memory_limit(memory_limit)
    step("validate")
    c, s = _validate(client, server)
    out_path = Path(out)
    _check_output(out_path, storage, [*c.files, *s.files])
    final = data_dir(out_path, storage)
    tmp = atomic.temporary(out_path)
    tmp_data = tmp if storage == Storage.PARQUET else atomic.temporary(final)
    target = _Target(tmp_data, final.resolve())
    _remove(tmp)
    _remove(tmp_data)
    con = None
    run: Engine | None = None
    try:
        tmp_data.mkdir()
        con = _open_output(tmp / CATALOG if storage == Storage.PARQUET else tmp, tmp, memory_limit)
        callid_macro(con, c)
        if engine == EngineChoice.SPARK:
            from pipeline.spark import SparkEngine  # (pyspark: an optional extra)
            run = SparkEngine(c, s, tmp_data, Path(str(tmp) + ".spill"), master, memory_limit)
        else:
            run = DuckEngine(con, target, c, s)
        counts = _derive(con, run, target, c, s, clock_sync, storage, step, description)
        con.close()
        Path(str(out_path) + ".wal").unlink(missing_ok=True)  # a stale WAL would be replayed onto it
        if storage == Storage.DUCKDB:
            atomic.install(tmp_data, final)
        atomic.install(tmp, out_path)
    except duckdb.Error as exc:
        reason = _write_failure(exc)
        if reason:  # (a full disk: the merge failed, its input is fine)
            raise Failed(f"{out}: cannot write the merged output ({reason})") from None
        raise InputError(f"merge failed: {str(exc).splitlines()[0]}") from None
    except OSError as exc:
        raise Failed(f"{out}: cannot write the merged output ({os_reason(exc)})") from None
    finally:
        if run is not None:
            run.close()
        if con is not None:
            con.close()
        _remove(tmp)
        _remove(tmp_data)
    return counts


def _check_choices(storage: str, clock_sync: str, engine: str, master: str | None) -> None:
    """:class:`InputError` for an option value that is none of its choices."""
    if storage not in set(Storage):
        raise InputError(f"unknown output storage {storage!r}: choose {listed(Storage)}")
    if clock_sync not in set(ClockSync):
        raise InputError(f"unknown clock model {clock_sync!r}: choose {listed(ClockSync)}")
    if engine not in set(EngineChoice):
        raise InputError(f"unknown engine {engine!r}: choose {listed(EngineChoice)}")
    if master and engine != EngineChoice.SPARK:
        raise InputError(f"--master {master}: a Spark master URL, for --engine spark only")


def _validate(client: str, server: str) -> tuple[LogInfo, LogInfo]:
    """Both logs validated, and of the same run."""
    c = validate_log(client, S.KIND_CLIENT)
    s = validate_log(server, S.KIND_SERVER)
    if c.layout != s.layout:
        raise InputError(f"{server}: CallID layout {s.layout} differs from the client log's {c.layout}")
    if c.run_id != s.run_id:
        raise InputError(f"{server}: run id {s.run_id!r} differs from the client log's {c.run_id!r} "
                         "(logs of different runs would link unrelated CallIDs)")
    return c, s


def _check_memory_limit(limit: str) -> None:
    """:class:`InputError` unless ``limit`` is a size above zero and within this machine's memory
    (DuckDB took -1GB as no limit, and 99999TB as none either)."""
    try:
        size = parse_size(limit, decimal=True)
    except BadValue as exc:
        raise InputError(f"--memory-limit {limit}: {exc}") from None
    total = _ram() or size
    if not 0 < size <= total:
        raise InputError(f"--memory-limit {limit}: not between 1 byte and this machine's memory "
                         f"({total >> 20} MiB)")


def _open_output(db: Path, tmp: Path, memory_limit: str | None) -> duckdb.DuckDBPyConnection:
    """The output's database, spilling beside ``tmp`` beyond ``memory_limit``."""
    con = duckdb.connect(str(db))
    con.execute("SET enable_progress_bar = false")  # progress is the caller's (on_step)
    try:
        con.execute(f"SET memory_limit = {literal(memory_limit or default_memory_limit())}")
    except duckdb.Error as exc:
        con.close()
        raise InputError(f"merge failed: --memory-limit {memory_limit} is not a size "
                         f"({str(exc).splitlines()[0]})") from None
    con.execute(f"SET temp_directory = {literal(str(tmp) + '.spill')}")
    # (rows are written in the order of an ORDER BY, else as they come: writing arrows in the order they
    # were read held every batch a slower thread had not yet written: 8.5 GB at 100 M events)
    con.execute("SET preserve_insertion_order = false")
    return con


def _derive(con: duckdb.DuckDBPyConnection, run: Engine, target: _Target, c: LogInfo, s: LogInfo,
            clock_sync: str, storage: str, step: Callable[[str], None], description: str) -> dict:
    """The merge's steps after validation: align clocks, build the tables, derive arrows and fan-out,
    write ``run``; return the row count per table."""
    run.check_values()
    step("align clocks")
    # (once the clocks' pairs are gathered, the clocks are fitted in Python, on one core: what the arrows
    # need of the logs is found beside, on the other)
    ahead: list[Future[_ArrowInputs]] = []

    def pairs(sql: str, n: int, ref: int) -> clocks.ClockPairs:
        held = run.clock_pairs(sql, n, ref)
        ahead.append(run.beside(lambda side: arrow_inputs(side, c.callid_layout.sentinel)))
        return held
    try:
        con.register("fits", clocks.estimate(run.rows, pairs, run.dialect, clock_sync))
    finally:
        wait(ahead)
    (inputs,) = [a.result() for a in ahead]  # (estimate fetches the pairs once)
    con.execute(f"CREATE TABLE clocks AS SELECT {_typed(CLOCKS.columns)} FROM fits")
    con.unregister("fits")
    step("build tables")
    kept = {info.kind: _keep_log(info, target.data) for info in (c, s)}
    con.execute(f"SET VARIABLE {DIR_VARIABLE} = {literal(str(target.data.resolve()))}")
    times = _times(con, run)
    build_tables(con, run, target, kept, c, times)
    step("derive arrows")
    derive_arrows(con, run, target, times, c.callid_layout.sentinel, inputs)
    step("derive fan-out")
    derive_fanout(con, run, target, times.server_clocks)
    run.close()
    write_run(con, c, s, clock_sync, description)
    if storage == Storage.PARQUET:  # (as Parquet files: other tools read them too)
        for table in (CLOCKS, RUN):
            target.copy(con, f"SELECT * FROM {table.name}", table.name)
            con.execute(f"DROP TABLE {table.name}")
            file = target.file_sql(f"{table.name}.parquet")
            con.execute(f"CREATE VIEW {table.name} AS SELECT * FROM {file}")
    check_tables(con)
    step("write")
    return {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in TABLES}


class Engine(Protocol):
    """What runs a merge's steps (their SQL made for :attr:`dialect`) over the views ``client_log`` and
    ``server_log`` of the logs, and writes the stored tables into the output's data directory."""

    dialect: Dialect

    def check_values(self) -> None:
        """:func:`pipeline.load.check_values` of both logs."""

    def rows(self, sql: str) -> list[tuple]:
        """The rows of a small result."""

    def beside(self, work: Callable[[Engine], T]) -> Future[T]:
        """``work`` of an engine on the same logs and output, beside what the caller does next (where
        the engine can: else now)."""

    def clock_pairs(self, sql: str, n: int, ref: int) -> clocks.ClockPairs:
        """The clock alignment's constraint pairs, the rows of ``sql`` (see :func:`clocks.estimate`)."""

    def write(self, select: str, name: str) -> list[str]:
        """Write the rows of ``select`` as Parquet; return the files' names in the data directory.  The
        engine's later SQL reads them as ``_name``."""

    def close(self) -> None:
        """Release what the engine holds (it may be called twice)."""


class DuckEngine:
    """The merge's steps run in the output's own DuckDB database (the default engine)."""

    dialect = DUCKDB

    def __init__(self, con: duckdb.DuckDBPyConnection, target: _Target, c: LogInfo, s: LogInfo) -> None:
        self.con, self.target, self.logs = con, target, (c, s)
        con.execute(f"CREATE TEMP VIEW client_log AS SELECT * FROM {c.scan()}")
        con.execute(f"CREATE TEMP VIEW server_log AS SELECT * FROM {s.scan()}")

    def check_values(self) -> None:
        for info in self.logs:
            check_values(self.con, info)

    def rows(self, sql: str) -> list[tuple]:
        return self.con.execute(sql).fetchall()

    def beside(self, work: Callable[[Engine], T]) -> Future[T]:
        """(on a second connection to the output, in a thread)"""
        con = self.con.cursor()
        con.execute("SET enable_progress_bar = false")
        side = DuckEngine(con, self.target, *self.logs)
        pool = ThreadPoolExecutor(1, thread_name_prefix="callid-merge")
        done = pool.submit(work, side)
        done.add_done_callback(lambda _: con.close())
        pool.shutdown(wait=False)
        return done

    def clock_pairs(self, sql: str, n: int, ref: int) -> clocks.ClockPairs:
        return clocks.LocalPairs(self.con.sql(sql).to_arrow_reader(1 << 20), n, ref)

    def write(self, select: str, name: str) -> list[str]:
        self.target.copy(self.con, select, name)
        return [f"{name}.parquet"]  # (its view ``_name`` is the catalog's: this database)

    def close(self) -> None:
        pass


def check_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Every table and view has exactly the columns ``callid_core.tables`` declares (else a bug)."""
    for name, table in MERGED.items():
        found = [(n, t.replace('"', "")) for n, t, *_ in con.execute(f"DESCRIBE {name}").fetchall()]
        declared = [(c.name, DUCKDB.type(c.type)) for c in table.columns]
        if found != declared:
            diff = next(((f, d) for f, d in zip(found, declared) if f != d), (found, declared))
            raise Failed(f"merge: table {name} does not match its declaration in callid_core.tables "
                         f"(found {diff[0]}, declared {diff[1]})")


def _is_merge_output_dir(path: Path) -> bool:
    """A directory holding only what a merge writes there (or wrote before the logs were kept)."""
    names = {p.name for p in path.iterdir()}
    return names <= {f"{t}.parquet" for t in (*TABLES, *VIEWS)} | {CATALOG, *LOG_DIRS, *TABLES}


def _check_output(out: Path, storage: str, inputs: Iterable[str]) -> None:
    """Refuse outputs that would destroy something other than a previous merge output."""
    if not out.parent.is_dir():
        raise InputError(f"{out}: directory {out.parent} does not exist")
    data = data_dir(out, storage).resolve()
    for f in inputs:
        f = Path(f).resolve()
        if f == out.resolve():
            raise InputError(f"{out}: is one of the input logs; choose another output")
        if data in f.parents:
            raise InputError(f"{out}: holds the input log {f}; choose another output")
    if out.is_dir() and (storage == "duckdb" or not _is_merge_output_dir(out)):
        raise InputError(f"{out}: is a directory that 'callid merge --storage parquet' did not write")
    if out.exists() and not out.is_dir() and storage == "parquet":
        raise InputError(f"{out}: is a file; --storage parquet writes a directory")
    if storage == "duckdb" and data.exists() and not (data.is_dir() and _is_merge_output_dir(data)):
        raise InputError(f"{data}: is not the data of a merged output; choose another output")


def _write_failure(exc: duckdb.Error) -> str:
    """Why DuckDB could not write a file (e.g. ``No space left on device``: its message says ``Could not
    write file ...``, with an errno or the reason); "" for any other error."""
    text = str(exc)
    if "could not write" not in text.lower():
        return ""
    errno = re.search(r'"errno":\s*"(\d+)"', text)
    if errno:
        return os.strerror(int(errno.group(1)))
    reason = re.search(r'Could not write file "[^"]*": ([^"{}\n]+)', text)
    return reason.group(1).strip() if reason else "I/O error"


def _remove(path: Path) -> None:
    for p in (path, Path(str(path) + ".wal"), Path(str(path) + ".spill")):
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def _keep_log(info: LogInfo, data: Path) -> list[str]:
    """The log's files in ``data/KIND/`` as ``000000.parquet``, ...: hard links (callid writes a log
    once, under a temporary name, and never changes it), else copies; their names in ``data``."""
    (data / info.kind).mkdir()
    names = [f"{info.kind}/{i:06d}.parquet" for i in range(len(info.files))]
    for f, name in zip(info.files, names):
        try:
            os.link(f, data / name)
        except OSError:
            shutil.copyfile(f, data / name)
    return names


def callid_macro(con: duckdb.DuckDBPyConnection, c: LogInfo) -> None:
    """Macro ``callid_hex(id)``: a CallID printed as ``callid_core.ids.Layout.format`` does (the views
    use it)."""
    layout = c.callid_layout
    bits = layout.counter_bits
    (rank_w, counter_w), mask = layout.hex_digits, layout.counter_mask
    con.execute(
        f"CREATE MACRO callid_hex(id) AS CASE WHEN id IS NULL THEN NULL ELSE "
        f"printf('0x%0{rank_w}x_%0{counter_w}x', id >> {bits}, id & {mask}::UBIGINT) END"
    )


@dataclass(frozen=True)
class _Times:
    """How times are put on the reference clock: written into the SQL (``inline``, a few clocks and
    windows: no join, see :func:`pipeline.clocks.inline_sql`), or by joining ``_clock_map``
    (``single``: one window per clock; ``windowed``: an ASOF join per time); ``identity`` when no
    clock moves."""

    mode: str
    windows: dict[str, list[clocks.Window]]
    server_clocks: dict[str, str]

    def source(self, source: str, times: dict[str, str], d: Dialect = DUCKDB) -> tuple[str, dict[str, str]]:
        """The ``FROM`` clause (``source`` as ``x``) and the expressions putting the time columns
        ``times`` (column -> ``x.clock``, or ``x.server`` for times on that server's clock) on the
        reference clock.  (Spark: always written into the SQL; it has no ASOF join.)"""
        sql = f"FROM {source} x"
        if self.mode == "identity":
            return sql, {col: f"x.{col}" for col in times}
        if self.mode == "inline" or d.spark:
            by_server = {srv: self.windows[clk] for srv, clk in self.server_clocks.items()
                         if clk in self.windows}
            return sql, {col: clocks.inline_sql(f"x.{col}", key, by_server if key == "x.server"
                                                else self.windows, d) for col, key in times.items()}
        exprs: dict[str, str] = {}
        aliases: dict[str, str] = {}
        for col, key in times.items():
            clock = key
            if key == "x.server":
                if "sc" not in aliases:
                    sql += " LEFT JOIN _server_clocks sc ON sc.server = x.server"
                    aliases["sc"] = "sc"
                clock = "sc.clock"
            if self.mode == "windowed":  # each time finds its own window
                alias = f"m{len(exprs)}"
                sql += (f" ASOF LEFT JOIN _clock_map {alias} ON {clock} = {alias}.clock"
                        f" AND x.{col} >= {alias}.t_from")
            elif clock not in aliases:  # one window per clock: one join per clock expression
                alias = aliases[clock] = f"m{len(aliases)}"
                sql += f" LEFT JOIN _clock_map {alias} ON {clock} = {alias}.clock"
            else:
                alias = aliases[clock]
            exprs[col] = clocks.mapped(f"x.{col}", alias)
        return sql, exprs


#: the earliest and the latest time of both logs (local times)
SPAN_SQL = """
    SELECT least(min(c.lo), min(s.lo)), greatest(max(c.hi), max(s.hi))
    FROM (SELECT least(min(t_start), min(t_end), min(t_recv), min(t_send)) AS lo,
                 greatest(max(t_start), max(t_end), max(t_recv), max(t_send)) AS hi FROM client_log) c,
         (SELECT least(min(t_start), min(t_end)) AS lo, greatest(max(t_start), max(t_end)) AS hi
          FROM server_log) s"""


def _times(con: duckdb.DuckDBPyConnection, run: Engine) -> _Times:
    """The clock mapping of the ``clocks`` table, leaving out the clocks it moves by less than a
    nanosecond over the logs' times; for a join, kept in the database (the views use it)."""
    joined = clocks.create_clock_map(con)  # (how a join applies it: single or windowed)
    lo, hi = run.rows(SPAN_SQL)[0]
    windows = clocks.moved_windows(con, lo or 0, hi or 0)
    servers = dict(run.rows("SELECT server, min(clock) FROM server_log GROUP BY server"))
    if not windows:
        return _Times("identity", {}, servers)
    if max(len(windows), len(servers)) <= clocks.INLINE_CLOCKS and \
            sum(map(len, windows.values())) <= clocks.INLINE_WINDOWS:
        return _Times("inline", windows, servers)
    con.execute("CREATE TABLE _clock_map AS SELECT * FROM clock_map")
    con.execute("CREATE TABLE _server_clocks (server VARCHAR, clock VARCHAR)")
    con.executemany("INSERT INTO _server_clocks VALUES (?, ?)", list(servers.items()))
    return _Times(joined, windows, servers)


def build_tables(con: duckdb.DuckDBPyConnection, run: Engine, target: _Target, logs: dict[str, list[str]],
                 c: LogInfo, times: _Times) -> None:
    """The client's tables ``calls``, ``waits``, ``mpi_calls``, ``nested_calls``, ``datatypes``, ``phases``
    (stored by ``run``: times on the reference clock, CallIDs NULL where absent), the views ``rpcs`` and
    ``server_ops`` over the logs kept at ``target`` (``logs``: their files by kind), the run's start
    (macro ``run_start()``) and the ``events`` view."""
    d, sentinel = run.dialect, c.callid_layout.sentinel
    callid = f"NULLIF(x.callid, {d.u64(sentinel)})"
    mask = d.u64(c.callid_layout.counter_mask)
    src, t = times.source("client_log", {"t_start": "x.clock", "t_end": "x.clock"}, d)
    columns = _select(CALLS, t, callid=callid, counter=f"{callid} & {mask}", file_offset="x.offset")
    _store(con, run, target, CALLS, f"SELECT {columns} {src} WHERE x.kind = 'call' ORDER BY t_start")
    _store(con, run, target, WAITS, f"SELECT {_select(WAITS, t, callid=callid)} {src} WHERE x.kind = 'wait' "
                                    "ORDER BY t_start")
    _store(con, run, target, MPI_CALLS, f"SELECT {_select(MPI_CALLS, t)} {src} WHERE x.kind = 'mpi' "
                                        "ORDER BY t_start")
    _store(con, run, target, NESTED_CALLS, f"SELECT {_select(NESTED_CALLS, t, callid=callid)} {src} "
                                           "WHERE x.kind = 'nested' ORDER BY t_start")
    _store(con, run, target, DATATYPES, f"SELECT {_select(DATATYPES, t)} {src} WHERE x.kind = 'type' "
                                        "ORDER BY rank, type_id")
    columns = _select(PHASES, t, callid=callid, phase="x.op", file_offset="x.offset")
    _store(con, run, target, PHASES, f"SELECT {columns} {src} WHERE x.kind = 'phase' ORDER BY t_start")
    # (a replay's cross-layer arrows: times of the source job, as they are)
    columns = _select(SOURCE_IO, {}, callid=callid, op="x.func", file_offset="x.offset",
                      exact="x.inferred = 'link'")
    _store(con, run, target, SOURCE_IO, f"SELECT {columns} FROM client_log x WHERE x.kind = 'source' "
                                        "ORDER BY callid, src_t_start")
    # (the run's start: the earliest call, request or server operation on the reference clock)
    src_r, t_r = times.source("client_log", {"t_start": "x.clock"}, d)
    src_s, t_s = times.source("server_log", {"t_start": "x.clock"}, d)
    start = run.rows(f"SELECT least((SELECT min(t_start) FROM _calls), (SELECT min({t_r['t_start']}) {src_r} "
                     f"WHERE x.kind = 'rpc'), (SELECT min({t_s['t_start']}) {src_s}))")[0][0]
    con.execute(f"CREATE MACRO run_start() AS {int(start or 0)}::BIGINT")
    logs = {kind: target.file_sql(*names) for kind, names in logs.items()}
    src, t = times.source(logs[S.KIND_CLIENT], {"t_start": "x.clock", "t_end": "x.clock",
                                                "t_recv": "x.server", "t_send": "x.server"})
    none = DUCKDB.u64(sentinel)
    # (a log that names no callids, e.g. a synthetic one: the one CallID of the callid column)
    callids = (f"CASE WHEN len(x.callids) = 0 AND x.callid <> {none} THEN [x.callid] "
               f"ELSE list_filter(x.callids, lambda v: v <> {none}) END")
    columns = _select(RPCS, t, callid=f"NULLIF(x.callid, {none})", callids=callids)
    con.execute(f"CREATE VIEW _{RPCS.name} AS SELECT {columns} {src} WHERE x.kind = 'rpc'")
    src, t = times.source(logs[S.KIND_SERVER], {"t_start": "x.clock", "t_end": "x.clock"})
    con.execute(f"CREATE VIEW _{SERVER_OPS.name} AS SELECT {_server_ops_columns(t, sentinel)} {src}")
    for table in (CALLS, WAITS, MPI_CALLS, NESTED_CALLS, DATATYPES, RPCS, PHASES, SERVER_OPS, SOURCE_IO):
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


def _server_ops_columns(t: dict[str, str], sentinel: int) -> str:
    """The stored columns of ``server_ops`` from a server log row ``x`` (times through ``t``)."""
    none = f"{sentinel}::UBIGINT"
    return _select(SERVER_OPS, t, callid=f"NULLIF(x.callid, {none})", disk_offset="x.offset",
                   callids=f"list_filter(x.callids, lambda v: v <> {none})",
                   # (aligned with callids: the unstamped left out of each)
                   **{name: f"CASE WHEN len(x.{name}) <> len(x.callids) THEN []::BIGINT[] "
                            f"WHEN list_contains(x.callids, {none}) THEN "
                            f"list_filter(x.{name}, lambda b, i: x.callids[i] <> {none}) "
                            f"ELSE x.{name} END" for name in ("callid_bytes", "callid_own")},
                   file_offset="NULLIF(x.file_offset, -1)", file_end="NULLIF(x.file_end, -1)")


def _stored(table: Table) -> list[str]:
    """The columns of ``table`` that are stored (in ``_name``): all but the :data:`DERIVED` ones."""
    return [c.name for c in table.columns if c.name not in DERIVED]


def _store(con: duckdb.DuckDBPyConnection, run: Engine, target: _Target, table: Table, select: str) -> None:
    """``run`` writes the rows of ``select`` as Parquet, and the view ``_name`` shows them with the declared
    types.  (Parquet in both layouts: it takes a third less time to write than a table of the database, and
    reads as fast.)"""
    files = run.write(select, table.name)
    stored = [c for c in table.columns if c.name not in DERIVED]
    columns = "*" if run.dialect is DUCKDB else _typed(stored)  # (Spark: no unsigned CallIDs, its own names)
    con.execute(f"CREATE VIEW _{table.name} AS SELECT {columns} FROM {target.file_sql(*files)}")


def _typed(columns: Iterable[Column]) -> str:
    """SQL: ``columns`` cast to their declared types."""
    return ", ".join(f'CAST("{c.name}" AS {DUCKDB.type(c.type)}) AS "{c.name}"' for c in columns)


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


#: the disk operations, in SQL on a row ``x`` of the server log
_DISK = f"x.layer IN ({S.DISK_LAYERS_SQL})"


def _odd(d: Dialect, sentinel: int) -> str:
    """SQL: an operation ``x`` whose CallID list names a CallID twice, or an unstamped one."""
    return (f"{d.size('x.callids')} > 1 AND ({d.position('x.callids', d.u64(sentinel))} IS NOT NULL "
            f"OR {d.size(d.distinct('x.callids'))} < {d.size('x.callids')})")


@dataclass(frozen=True)
class _ArrowInputs:
    """What the arrows' query needs to know of the logs first (no clock needed): how many disk operations
    list a CallID twice or an unstamped one, and the text columns' casts to labels (:func:`_labels`)."""

    odd: int
    labels: dict[str, str]


def arrow_inputs(run: Engine, sentinel: int) -> _ArrowInputs:
    """The :class:`_ArrowInputs` of the logs ``run`` reads."""
    d = run.dialect
    odd = run.rows(f"SELECT count(*) FROM server_log x WHERE {_DISK} AND {_odd(d, sentinel)}")[0][0]
    calls = "client_log x WHERE x.kind = 'call'"  # (the rows of _calls)
    labels = _labels(run.con, {"server": "server_log", "layer": f"server_log x WHERE {_DISK}",
                               "op": f"server_log x WHERE {_DISK}", "func": calls, "file": calls}
                     ) if isinstance(run, DuckEngine) else {}
    return _ArrowInputs(odd, labels)


def derive_arrows(con: duckdb.DuckDBPyConnection, run: Engine, target: _Target, times: _Times,
                  sentinel: int, inputs: _ArrowInputs) -> None:
    """One row per (call, disk operation) with the call's bytes of it: unnest each operation's
    CallIDs with their bytes, hash-join the calls.  An operation of one CallID is all its
    call's; a CallID listed twice is one arrow with the bytes of both.  Straight from the
    server log, in one pass when no operation lists a CallID twice or an unstamped one."""
    d = run.dialect
    src, t = times.source("server_log", {"t_start": "x.clock", "t_end": "x.clock"}, d)
    disk, odd, has_odd, labels = _DISK, _odd(d, sentinel), inputs.odd, inputs.labels
    label = {k: labels.get(k, "") for k in ("server", "layer", "op", "func", "file")}
    named = {"server": f"x.server{label['server']}", "layer": f"x.layer{label['layer']}",
             "op": f"x.op{label['op']}", "handle": "x.handle", "disk_offset": "x.offset",
             "file_offset": "NULLIF(x.file_offset, -1)", "file_end": "NULLIF(x.file_end, -1)",
             "size": "x.size", "holes": "x.holes", "t_start": t["t_start"], "t_end": t["t_end"],
             "event_id": "x.event_id"}
    columns = ", ".join(f"{expr} AS {name}" for name, expr in named.items())
    names = ", ".join(named)
    counts = (f"{d.size('x.callid_bytes')} AS n_bytes, {d.size('x.callid_own')} AS n_own, "
              f"{d.size('x.callids')} AS n_listed")

    def unnested(where: str, n_callids: str) -> str:
        """The disk operations of ``where``, one row per place in their CallID list (``callid`` and its
        bytes ``b``, ``o``), their columns worked out before the unnest: once per operation, not per arrow."""
        each, source = d.unnest_zip(f"""
            FROM (SELECT x.callids, x.callid_bytes, x.callid_own, {n_callids} AS n_callids, {counts},
                         {columns}
                  {src} WHERE {disk} AND {where}) x""",
                                    {"callid": "x.callids", "b": "x.callid_bytes", "o": "x.callid_own"})
        return f"SELECT {each}, n_callids, n_bytes, n_own, n_listed, {names} {source}"

    plain = f"{d.size('x.callids')} > 0" + (f" AND NOT ({odd})" if has_odd else "")
    links = f"""
        -- each CallID with its bytes (the logged ones, if there is one per CallID)
        SELECT callid, n_callids,
               CASE WHEN n_callids = 1 THEN size WHEN n_bytes = n_callids THEN b
                    WHEN size = 0 THEN 0 END AS share_bytes,
               CASE WHEN n_own = n_callids THEN o WHEN n_callids = 1 THEN size - holes
                    WHEN size = 0 THEN 0 END AS own_bytes, {names}
        FROM ({unnested(plain, d.size("x.callids"))}) u"""
    if has_odd:  # (not written by callid's servers): one link per stamped CallID, the bytes of its
        # places in the list summed (an unstamped one and its bytes left out)
        none = d.u64(sentinel)
        stamped = d.size(d.distinct(d.filter("x.callids", "v", f"v <> {none}")))
        links += f"""
        UNION ALL
        SELECT callid, n_callids,
               CASE WHEN n_callids = 1 THEN size
                    WHEN count(b) = count(*) THEN CAST(sum(b) AS BIGINT) END AS share_bytes,
               CASE WHEN count(o) = count(*) THEN CAST(sum(o) AS BIGINT)
                    WHEN n_callids = 1 THEN size - holes END AS own_bytes, {names}
        FROM (SELECT callid, n_callids, CASE WHEN n_bytes = n_listed THEN b WHEN size = 0 THEN 0 END AS b,
                     CASE WHEN n_own = n_listed THEN o WHEN size = 0 THEN 0 END AS o, {names}
              FROM ({unnested(odd, stamped)}) ls
              WHERE callid <> {none}) s
        GROUP BY callid, n_callids, {names}"""
    # (the calls are the join's build side, whatever the estimates say: the links are many more, 80 M at
    # 100 M events, and a hash table of them took 7 GB)
    con.execute("SET disabled_optimizers = 'build_side_probe_side'")
    # (what comes of the call, worked out once per call: not once per arrow, a tenth of the query's time)
    calls = (f"SELECT callid, rank, func{label['func']} AS func, file{label['file']} AS file, t_start, "
             "t_end, func LIKE '%write%' AS writes FROM _calls")
    _store(con, run, target, ARROWS, f"""
        SELECT l.callid, c.rank, c.func, c.file, c.t_start AS call_t_start, c.t_end AS call_t_end, l.server,
               l.layer, l.op, l.handle, l.disk_offset, l.file_offset, l.file_end, l.size, l.share_bytes,
               l.own_bytes, l.holes, l.op = 'trove_read' AND c.writes AS rmw, l.t_start, l.t_end,
               l.event_id, l.n_callids, l.share_bytes IS NOT NULL AS exact
        FROM ({links}) l JOIN ({calls}) c ON c.callid = l.callid
    """)
    con.execute("RESET disabled_optimizers")
    for column in labels:
        con.execute(f"DROP TYPE IF EXISTS _{column}_label")
    _show(con, ARROWS)


def _labels(con: duckdb.DuckDBPyConnection, sources: dict[str, str]) -> dict[str, str]:
    """Per text column (-> the rows it comes from, ``FROM`` what), a cast to an ENUM of its values when
    it has at most 2^16, else nothing: a column of a few labels repeated is written a sixth faster so
    (the file holds text either way)."""
    out = {}
    for column, source in sources.items():
        values = con.execute(f"SELECT count(DISTINCT {column}) FROM {source}").fetchall()[0][0]
        out[column] = ""
        if 0 < values <= 2**16:
            con.execute(f"CREATE TYPE _{column}_label AS ENUM (SELECT DISTINCT {column} FROM {source} "
                        f"{'AND' if 'WHERE' in source else 'WHERE'} {column} IS NOT NULL)")
            out[column] = f"::_{column}_label"
    return out


#: the type of ``fanout.bytes_per_server`` (an empty list of no server has none)
_BYTES_PER_SERVER = next(c.type for c in FANOUT.columns if c.name == "bytes_per_server")
#: fan-out per server is counted in one pass for at most this many servers (three columns each)
PIVOT_SERVERS = 32


def derive_fanout(con: duckdb.DuckDBPyConnection, run: Engine, target: _Target,
                  servers: Iterable[str]) -> None:
    """Per call: disk operations, servers touched, its bytes of them in total and per server
    (apportioned shares: over all calls each disk byte counts once; and its own bytes), arrows
    without bytes.  For a few servers, one aggregation with three columns per server (ops and the
    two byte counts); else per call and server, then per call."""
    d = run.dialect
    servers = sorted(servers)
    if len(servers) <= PIVOT_SERVERS:
        # (sums of CASE, not FILTER clauses: a tenth less time for 8 servers)
        sums = ", ".join(f"sum(CASE WHEN s = {i} THEN 1 ELSE 0 END) AS o{i}, "
                          f"sum(CASE WHEN s = {i} THEN share_bytes END) AS b{i}, "
                          f"sum(CASE WHEN s = {i} THEN own_bytes END) AS w{i}"
                          for i in range(1, len(servers) + 1))
        per_server = d.filter(d.array(d.struct({"server": literal(name), "ops": f"o{i}",
                                                "share_bytes": f"CAST(coalesce(b{i}, 0) AS BIGINT)",
                                                "own_bytes": f"CAST(coalesce(w{i}, 0) AS BIGINT)"})
                                      for i, name in enumerate(servers, 1)), "e", "e.ops > 0")
        per_call = f"""
            SELECT callid, disk_ops, share_bytes, own_bytes, inexact_arrows,
                   {d.size("bytes_per_server")} AS servers, bytes_per_server
            FROM (SELECT callid, disk_ops, share_bytes, own_bytes, inexact_arrows,
                         {per_server} AS bytes_per_server
                  FROM (SELECT callid, CAST(count(*) AS BIGINT) AS disk_ops,
                               CAST(coalesce(sum(share_bytes), 0) AS BIGINT) AS share_bytes,
                               CAST(coalesce(sum(own_bytes), 0) AS BIGINT) AS own_bytes,
                               CAST(count(*) FILTER (WHERE NOT exact) AS BIGINT) AS inexact_arrows, {sums}
                        FROM (SELECT callid, share_bytes, own_bytes, exact,
                                     {d.position(d.strings(servers), "server")} AS s
                              FROM _arrows) a
                        GROUP BY callid) g) p"""
    else:
        per_call = f"""
            SELECT callid, CAST(sum(ops) AS BIGINT) AS disk_ops,
                   CAST(sum(share_bytes) AS BIGINT) AS share_bytes,
                   CAST(sum(own_bytes) AS BIGINT) AS own_bytes,
                   CAST(sum(inexact) AS BIGINT) AS inexact_arrows, CAST(count(*) AS BIGINT) AS servers,
                   -- (sorted afterwards, by server as it comes first: cheaper than an ordered aggregate)
                   {d.collect(d.struct({"server": "server", "ops": "ops", "share_bytes": "share_bytes",
                                        "own_bytes": "own_bytes"}))}
                       AS bytes_per_server
            FROM (SELECT callid, server, count(*) AS ops,
                         CAST(coalesce(sum(share_bytes), 0) AS BIGINT) AS share_bytes,
                         CAST(coalesce(sum(own_bytes), 0) AS BIGINT) AS own_bytes,
                         count(*) FILTER (WHERE NOT exact) AS inexact
                  FROM _arrows GROUP BY callid, server) a
            GROUP BY callid"""
    _store(con, run, target, FANOUT, f"""
        SELECT c.callid, c.rank, c.func, c.size,
               coalesce(p.disk_ops, 0) AS disk_ops, coalesce(p.servers, 0) AS servers,
               coalesce(p.share_bytes, 0) AS share_bytes, coalesce(p.own_bytes, 0) AS own_bytes,
               coalesce(p.inexact_arrows, 0) AS inexact_arrows,
               CAST(coalesce(p.bytes_per_server, {d.array([])}) AS {d.type(_BYTES_PER_SERVER)})
                   AS bytes_per_server
        FROM _calls c LEFT JOIN ({per_call}) p ON p.callid = c.callid
    """)
    _show(con, FANOUT)


def write_run(con: duckdb.DuckDBPyConnection, c: LogInfo, s: LogInfo, clock_sync: str,
              description: str = "") -> None:
    """The ``run`` table: both logs' metadata (``client.*``, ``server.*``), layout, sentinel, the
    clock model used and the user's description (if any)."""
    start = con.execute("SELECT run_start()").fetchall()[0][0]
    rows = [("layout", c.layout), ("sentinel", str(c.callid_layout.sentinel)), ("clock_sync", clock_sync),
            ("start_ns", str(start)), *([("description", description)] if description else [])]
    for info in (c, s):
        meta = {**info.metadata, "files": str(len(info.files)), "rows": str(info.rows)}
        meta.pop("kind", None)
        rows += [(f"{info.kind}.{key}", value) for key, value in sorted(meta.items())]
    con.execute("CREATE TABLE run (key VARCHAR, value VARCHAR)")
    con.executemany("INSERT INTO run VALUES (?, ?)", rows)
