"""A merged output: its layout on disk, and :class:`Merged`, the one handle every reader takes.

``callid merge`` (:mod:`pipeline.merge`, the writer) writes the layout declared here; the readers
(stats, checks, insights, report, timeline, exports, queries) open it once with :func:`open_merged`
and share the handle, so the writer and the readers are siblings that meet only in this module.

Two packagings of one layout:

- ``--storage duckdb``, ``-o merged.duckdb``: the DuckDB file ``merged.duckdb`` (the views,
  ``clocks``, ``run``) and beside it the directory ``merged.duckdb.data`` (the logs in
  ``client/`` and ``server/``, the stored tables as ``arrows.parquet``, ...);
- ``--storage parquet``, ``-o merged``: one directory holding all of it, every table as Parquet
  and the views in ``callid.duckdb``.

The views find their files through the DuckDB variable ``callid_dir``, which :func:`open_merged`
sets to where they are now, so an output moved as a whole keeps working.  A database can hold any
view: an output someone sends you could read your files into what callid prints or writes, so a
handle reaches no file but the output's own and its private scratch directory (DuckDB's external
access off; a view reading anything else fails in one line).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from callid_core import schema as S
from callid_core.choices import Storage
from callid_core.errors import InputError
from callid_core.ids import Layout
from callid_core.outputs import DATA_SUFFIX
from callid_core.tables import MERGED
from pipeline.dialect import literal
from pipeline.domain import DISK_DATA_SQL, MACROS_SQL

__all__ = ["CATALOG", "DATA_SUFFIX", "DIR_VARIABLE", "LOG_DIRS", "TABLES", "VIEWS", "Handle", "Merged",
           "data_dir", "open_merged"]

VIEWS = ("events",)
TABLES = tuple(name for name in MERGED if name not in VIEWS)
#: in a merged Parquet directory, the database of the views (beside a merged DuckDB file ``X``, the
#: directory ``X`` + DATA_SUFFIX holds the logs and the stored tables)
CATALOG = "callid.duckdb"
#: the subdirectories of the logs in an output's data directory
LOG_DIRS = (S.KIND_CLIENT, S.KIND_SERVER)
#: the DuckDB variable naming the directory of the logs and of a Parquet output's tables
DIR_VARIABLE = "callid_dir"

T = TypeVar("T")
H = TypeVar("H", bound="Handle")


class _Shared:
    """What the connections of one database share: the blocks of :meth:`Handle.settings` open on them
    (setting -> (block, value), oldest first) and each setting's value before the first."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.blocks: dict[str, list[tuple[object, str]]] = {}
        self.before: dict[str, str] = {}


def data_dir(out: Path, storage: str) -> Path:
    """Where a merged output at ``out`` keeps its logs and its stored tables."""
    return out if storage == Storage.PARQUET else Path(str(out) + DATA_SUFFIX)


class Handle:
    """An open DuckDB database the analyses read: its connection, and what they compute once on it.

    :class:`Merged` is the handle of a merged output; the counters of a Darshan log open as a plain
    one (:mod:`pipeline.darshan_insights`).
    """

    def __init__(self, path: str, con: duckdb.DuckDBPyConnection, shared: _Shared | None = None) -> None:
        self.path = path
        self.con = con
        self._memo: dict[object, Any] = {}
        self._shared = shared or _Shared()
        self._side: tuple[ThreadPoolExecutor, Handle] | None = None

    def sql(self, query: str, params: object = None) -> duckdb.DuckDBPyRelation:
        """The relation of ``query`` (``.fetchall()``, ``.df()``, ``.arrow()``, ``.pl()``)."""
        self.con.abort()  # (an analysis may have left a result of execute() unread: DuckDB then refuses)
        return self.con.sql(query, params=params)

    def rows(self, query: str, params: object = None) -> list[tuple]:
        """The rows of ``query``."""
        return self.con.execute(query, params).fetchall()

    def once(self, key: object, compute: Callable[[], T]) -> T:
        """``compute()``'s result, computed once per handle (an analysis that several others read); if
        :meth:`start` began it, its result when it is done (``compute()`` if it ran out of memory there)."""
        if key not in self._memo:
            self._memo[key] = compute()
        value = self._memo[key]
        if isinstance(value, Future):
            try:
                value = value.result()
            except duckdb.OutOfMemoryException:  # (beside, under a memory limit: here, under this one's)
                value = compute()
            self._memo[key] = value
        return value

    def start(self, key: object, compute: Callable[[Handle], T]) -> None:
        """Begin ``once(key)``'s computation now, beside what the caller does next: ``compute`` of a
        second connection to this database (its own temporary views and tables: none of this one's), in a
        thread; analyses so begun run one after the other.  DuckDB leaves cores idle between the phases of
        a query; two queries at once use them."""
        if key in self._memo:
            return
        if self._side is None:
            self._side = (ThreadPoolExecutor(1, thread_name_prefix="callid-side"), self._connect_side())
        worker, side = self._side
        self._memo[key] = worker.submit(compute, side)

    def wait_started(self) -> None:
        """Wait until what :meth:`start` began has ended (failed or not)."""
        wait([v for v in self._memo.values() if isinstance(v, Future)])

    def _connect_side(self) -> Handle:
        """A handle of a second connection to the database, set up as this one."""
        return Handle(self.path, self._side_connection(), self._shared)

    def _side_connection(self) -> duckdb.DuckDBPyConnection:
        con = self.con.cursor()
        con.execute("SET enable_progress_bar = false")
        return con

    def temp_table(self, name: str, select: str) -> str:
        """``name``: the rows of ``select`` as a temporary table of this handle, made once (what several
        analyses read and is costly to compute again, e.g. the servers' busy time); of the rows
        :meth:`start_temp_table` began, if it did."""
        def make() -> None:
            begun = ("temp_table rows", name)
            if begun not in self._memo:
                self.con.execute(f"CREATE TEMP TABLE {name} AS {select}")
                return
            rows = self.once(begun, lambda: self.con.sql(select).to_arrow_table())
            self.con.register("_temp_table_rows", rows)
            try:
                self.con.execute(f"CREATE TEMP TABLE {name} AS SELECT * FROM _temp_table_rows")
            finally:
                self.con.unregister("_temp_table_rows")
        self.once(("temp_table", name), make)
        return name

    def start_temp_table(self, name: str, select: str) -> None:
        """Begin the rows of :meth:`temp_table` ``name`` beside the caller (:meth:`start`)."""
        self.start(("temp_table rows", name), lambda side: side.con.sql(select).to_arrow_table())

    @contextmanager
    def settings(self, **values: str) -> Iterator[None]:
        """DuckDB settings (``memory_limit``, ``temp_directory``, ...) for the duration of a block, put
        back after it (the handle is shared by the analyses of a command).  They are the database's, the
        same on the connection of :meth:`start`: of blocks open at once there, the last opened that is
        still open holds; after the last one, the value before the first."""
        token, shared = object(), self._shared
        with shared.lock:
            for k, v in values.items():
                if not shared.blocks.setdefault(k, []):
                    shared.before[k] = self.rows(f"SELECT current_setting('{k}')")[0][0]
                shared.blocks[k].append((token, v))
                self.con.execute(f"SET {k} = {literal(v)}")
        try:
            yield
        finally:
            with shared.lock:
                for k in values:
                    shared.blocks[k] = [b for b in shared.blocks[k] if b[0] is not token]
                    try:
                        if shared.blocks[k]:
                            self.con.execute(f"SET {k} = {literal(shared.blocks[k][-1][1])}")
                        else:  # (DuckDB's default exactly, if it was that: its text is rounded)
                            self.con.execute(f"RESET {k}")
                            if self.rows(f"SELECT current_setting('{k}')")[0][0] != shared.before[k]:
                                self.con.execute(f"SET {k} = {literal(str(shared.before[k]))}")
                    except duckdb.OutOfMemoryException:  # (a lower memory limit while a query on the other
                        pass  # connection holds more: the higher one stays until the last block ends)

    def setting_before(self, name: str) -> str:
        """DuckDB's setting ``name`` as it is outside any block of :meth:`settings`."""
        with self._shared.lock:
            if self._shared.blocks.get(name):
                return self._shared.before[name]
            return self.rows(f"SELECT current_setting('{name}')")[0][0]

    def close(self) -> None:
        """Close the connection (and the second one of :meth:`start`, its analysis interrupted)."""
        if self._side is not None:
            worker, side = self._side
            worker.shutdown(wait=False, cancel_futures=True)
            for begun in [v for v in self._memo.values() if isinstance(v, Future)]:
                while not begun.done():  # (its queries interrupted until it ends)
                    side.con.interrupt()
                    wait([begun], timeout=0.05)
            worker.shutdown()
            side.close()
            self._side = None
        self.con.close()

    def __enter__(self: H) -> H:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r})"


class Merged(Handle):
    """An open merged output (read-only): its connection, run metadata and tables.

    Every table and view is an attribute, a DuckDB relation (``m.arrows.df()``, ``.to_arrow_table()``,
    ``.pl()``); :meth:`sql` runs any query.  Use it as a context manager, or :meth:`close` it.
    """

    def __init__(self, path: str, con: duckdb.DuckDBPyConnection, scratch: Path,
                 shared: _Shared | None = None) -> None:
        super().__init__(path, con, shared)
        #: the handle's private directory (owner only), the one place besides the output DuckDB may
        #: write (scratch databases; it spills into ``spill/``); removed with the last handle using it
        self.scratch = scratch

    def _connect_side(self) -> Merged:
        con = self._side_connection()
        (data,) = self.rows(f"SELECT getvariable('{DIR_VARIABLE}')")[0]
        con.execute(f"SET VARIABLE {DIR_VARIABLE} = {literal(data)}")
        con.execute(MACROS_SQL)
        _SCRATCH[self.scratch] += 1
        return Merged(self.path, con, self.scratch, self._shared)

    def table(self, name: str) -> duckdb.DuckDBPyRelation:
        """The table or view ``name`` (see :data:`callid_core.tables.MERGED`) as a relation."""
        if name not in MERGED:
            raise AttributeError(f"no table {name!r} (tables: {', '.join(MERGED)})")
        self.con.abort()
        return self.con.table(name)

    def __getattr__(self, name: str) -> duckdb.DuckDBPyRelation:
        if name.startswith("_") or name not in MERGED:
            raise AttributeError(name)
        return self.table(name)

    def __dir__(self) -> list[str]:
        return [*super().__dir__(), *MERGED]

    @cached_property
    def run(self) -> dict[str, str]:
        """The ``run`` table: the run's metadata, key -> value."""
        return dict(self.rows("SELECT key, value FROM run"))

    @cached_property
    def config(self) -> dict:
        """The run's configuration (the client log's, else the server log's; {} if none)."""
        for key in ("client.config", "server.config"):
            try:
                config = json.loads(self.run.get(key) or "{}")
            except ValueError:
                continue
            if isinstance(config, dict) and config:
                return config
        return {}

    @cached_property
    def layout(self) -> Layout:
        """The CallID layout of the run."""
        return Layout.parse(self.run.get("layout") or "64/23")

    @cached_property
    def roles(self) -> dict[str, list[str]]:
        """Server names by role ('io', 'meta'): from the run's configuration, else from the events they
        logged (disk data: an I/O server; metadata operations: a metadata server)."""
        listed = self.config.get("servers")
        servers = [s for s in listed if isinstance(s, dict)] if isinstance(listed, list) else []
        roles = {r: sorted(s["name"] for s in servers if r in s.get("roles", ())) for r in ("io", "meta")}
        found = {"io": f"SELECT DISTINCT server FROM ({DISK_DATA_SQL})",
                 "meta": "SELECT DISTINCT server FROM server_ops WHERE layer = 'meta'"}
        for role, sql in found.items():
            if not roles[role]:
                roles[role] = sorted(s for (s,) in self.rows(sql))
        return roles

    def close(self) -> None:
        """Close the connection (and the scratch directory with the last handle using it)."""
        super().close()
        _release(self.scratch)


def open_merged(db: str | os.PathLike, sandbox: bool = False) -> Merged:
    """Open the merged output at ``db`` (a DuckDB file, or a directory from ``--storage parquet``)
    read-only, its views pointed at its files wherever the output now is, and only its files readable;
    :class:`InputError` if it is missing, damaged or not a complete one.

    Every handle reaches no file but the output's own and its scratch directory (:attr:`Merged.scratch`):
    views and macros stored in the database cannot read others.  ``sandbox`` (``callid sql``): besides,
    the configuration is locked (no setting can be changed back).
    """
    db = str(db)
    con, scratch = _connect(db)
    try:
        con.execute("SET enable_progress_bar = false")  # (DuckDB would draw it into stdout, amid the results)
        con.execute(MACROS_SQL)
        _check_complete(con, db)
        if sandbox:
            con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        _release(scratch)
        raise
    return Merged(db, con, scratch)


#: scratch directory -> handles using it (handles of one file in one process share DuckDB's database,
#: and so its settings)
_SCRATCH: dict[Path, int] = {}


def _release(scratch: Path) -> None:
    _SCRATCH[scratch] -= 1
    if not _SCRATCH[scratch]:
        del _SCRATCH[scratch]
        shutil.rmtree(scratch, ignore_errors=True)


@atexit.register
def _remove_scratch() -> None:
    """At exit, the scratch directories of handles never closed (a notebook's, a test's)."""
    for scratch in list(_SCRATCH):
        shutil.rmtree(scratch, ignore_errors=True)


def _connect(db: str) -> tuple[duckdb.DuckDBPyConnection, Path]:
    """A read-only connection to the output at ``db``, ``callid_dir`` set and only its files allowed;
    and its scratch directory."""
    path = Path(db)
    if path.is_dir():
        data = path
        con = _open_file(path / CATALOG, db) if (path / CATALOG).is_file() else _parquet_views(path)
    elif not path.is_file():
        raise InputError(f"{db}: no such file")
    else:
        _check_magic(path, db)
        con = _open_file(path, db)
        data = data_dir(path, Storage.DUCKDB)
        if not data.is_dir() and _reads_logs(con):
            con.close()
            raise InputError(f"{db}: its logs and tables ({data.name}/) are missing: a merged output is "
                             "the database and that directory, moved or copied together")
    data = data.resolve()
    con.execute(f"SET VARIABLE {DIR_VARIABLE} = {literal(str(data))}")
    try:
        scratch = _restrict(con, data)
    except InputError as exc:
        con.close()
        raise InputError(f"{db}: {exc}") from None
    present = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    for name in (t for t in (*TABLES, *VIEWS) if t in present):  # (a missing or damaged file: said now)
        try:
            con.execute(f'SELECT * FROM "{name}" LIMIT 0').fetchall()
        except duckdb.Error as exc:
            con.close()
            _release(scratch)
            first = str(exc).splitlines()[0]
            if isinstance(exc, duckdb.PermissionException):
                raise InputError(f"{db}: its table '{name}' reads a file that is not the output's own, "
                                 f"refused ({first}): open only outputs of callid merge") from None
            raise InputError(f"{db}: damaged ({first})") from None
    return con, scratch


def _restrict(con: duckdb.DuckDBPyConnection, data: Path) -> Path:
    """Let ``con`` reach the output's own files under ``data`` (regular files, not links out of it) and
    a scratch directory of its own, nothing else; return that directory.  (Set once per database: a
    second handle of the same file in this process shares the first one's settings.)"""
    ((external, locked, dirs),) = con.execute(
        "SELECT current_setting('enable_external_access'), current_setting('lock_configuration'), "
        "current_setting('allowed_directories')").fetchall()
    if locked:
        raise InputError("open in this process with sandbox=True, which locks its settings for every "
                         "handle: close that one first")
    if not external:  # (this process opened it already: its scratch directory serves, made again if gone)
        scratch = Path(dirs[0].rstrip("/"))
        try:
            scratch.mkdir(mode=0o700)
        except FileExistsError:
            st = scratch.lstat()
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
                raise InputError(f"its scratch directory {scratch} is not this user's own") from None
    else:
        files = [f for f in (*data.glob("*.parquet"), *data.glob("*/*.parquet"))  # (not the directories)
                 if f.is_file() and f.resolve().is_relative_to(data)]
        scratch = Path(tempfile.mkdtemp(prefix="callid-"))  # (mode 0700)
        con.execute("SET allowed_paths = $files", {"files": [str(f) for f in files]})
        con.execute("SET allowed_directories = $dirs", {"dirs": [f"{scratch}/"]})
        con.execute(f"SET temp_directory = {literal(str(scratch / 'spill'))}")
        con.execute("SET enable_external_access = false")
    _SCRATCH[scratch] = _SCRATCH.get(scratch, 0) + 1
    return scratch


def _parquet_views(path: Path) -> duckdb.DuckDBPyConnection:
    """An output of an earlier version, every table a Parquet file: a view of each."""
    con = duckdb.connect()
    for name in MERGED:
        table = path / f"{name}.parquet"
        if table.is_file():
            try:
                con.execute(f'CREATE VIEW "{name}" AS SELECT * FROM read_parquet({literal(str(table))})')
            except duckdb.Error as exc:
                con.close()
                raise InputError(f"{table}: not a table written by 'callid merge' "
                                 f"({str(exc).splitlines()[0]})") from None
    return con


def _check_magic(path: Path, db: str) -> None:
    """:class:`InputError` unless ``path`` is a DuckDB file (DuckDB's own error names something else)."""
    with open(path, "rb") as f:
        head = f.read(12)
    if head[8:12] != b"DUCK":
        what = "a Parquet file: merge the logs with 'callid merge' first" if head[:4] == b"PAR1" \
            else "not a DuckDB file"
        raise InputError(f"{db}: not a database written by 'callid merge' ({what})")


def _open_file(path: Path, db: str) -> duckdb.DuckDBPyConnection:
    try:
        return duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        raise InputError(f"{db}: not a database written by 'callid merge' "
                         f"({str(exc).splitlines()[0]})") from None


def _reads_logs(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the database's views read files kept beside it (not so in earlier versions)."""
    return bool(con.execute("SELECT count(*) FROM duckdb_views() WHERE sql LIKE ?",
                            [f"%getvariable('{DIR_VARIABLE}')%"]).fetchall()[0][0])


def _check_complete(con: duckdb.DuckDBPyConnection, db: str) -> None:
    """:class:`InputError` unless every declared table and view is there with its columns, readable."""
    have: dict[str, set[str]] = {}
    columns = con.execute("SELECT table_name, column_name FROM information_schema.columns").fetchall()
    for table, column in columns:
        have.setdefault(table, set()).add(column)
    missing = [name for name in (*TABLES, *VIEWS) if name not in have]
    if missing and {"calls", "arrows", "run"} <= have.keys():
        raise InputError(f"{db}: written by an earlier version of 'callid merge' (no table '{missing[0]}'): "
                         "merge its logs again")
    if missing:
        raise InputError(f"{db}: not a database written by 'callid merge' (no table '{missing[0]}')")
    for name in (*TABLES, *VIEWS):
        absent = [c.name for c in MERGED[name].columns if c.name not in have[name]]
        if absent:
            raise InputError(f"{db}: not a database written by this version of 'callid merge' (table "
                             f"'{name}' has no column '{absent[0]}')")
    try:
        con.execute("SELECT count(*) FROM run").fetchall()
    except duckdb.Error as exc:
        raise InputError(f"{db}: damaged ({str(exc).splitlines()[0]})") from None
    if Path(db).is_file():  # (a cut file opens, and fails only when a query reaches its end)
        ((blocks,),) = con.execute("SELECT block_size * total_blocks FROM pragma_database_size()").fetchall()
        if Path(db).stat().st_size < blocks:
            raise InputError(f"{db}: damaged (the file is {Path(db).stat().st_size} bytes, its database "
                             f"{blocks}: cut short?)")
