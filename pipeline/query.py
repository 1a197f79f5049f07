"""Run SQL on a merged database and format the result (table, csv, json, markdown)."""

from __future__ import annotations

import csv
import io
import itertools
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import duckdb

from callid_core import jsonout
from callid_core.choices import RowFormat, listed
from callid_core.errors import BadValue, InputError
from callid_core.tables import MERGED
from callid_core.units import ranks_text  # noqa: F401  (re-exported: stats, checks)
from pipeline.merge import TABLES, VIEWS, open_merged

#: a call that moves data (a split collective's data is its _begin's): a condition on a row of calls
DATA_CALL_WHERE = ("size > 0 AND (func LIKE 'MPI_File_%read%' OR func LIKE 'MPI_File_%write%') "
                   "AND func NOT LIKE '%\\_end' ESCAPE '\\'")
#: the calls that move data, with their direction
DATA_CALLS_SQL = ("SELECT *, CASE WHEN func LIKE '%read%' THEN 'read' ELSE 'write' END AS direction "
                  f"FROM calls WHERE {DATA_CALL_WHERE}")
#: the Trove data operations (the servers' disk reads and writes), with their direction
DISK_DATA_SQL = ("SELECT *, CASE op WHEN 'trove_read' THEN 'read' ELSE 'write' END AS direction "
                 "FROM server_ops WHERE op IN ('trove_read', 'trove_write')")


def run_config(con: duckdb.DuckDBPyConnection) -> dict:
    """The run's configuration (the client log's, else the server log's; {} if none)."""
    run = dict(con.execute("SELECT key, value FROM run WHERE key IN ('client.config', 'server.config')")
               .fetchall())
    for key in ("client.config", "server.config"):
        try:
            config = json.loads(run.get(key) or "{}")
        except ValueError:
            continue
        if isinstance(config, dict) and config:
            return config
    return {}


def server_roles(con: duckdb.DuckDBPyConnection, config: dict) -> dict[str, list[str]]:
    """Server names by role ('io', 'meta'): from the run's configuration, else from the events they
    logged (disk data: an I/O server; metadata operations: a metadata server)."""
    listed = config.get("servers")
    servers = [s for s in listed if isinstance(s, dict)] if isinstance(listed, list) else []
    roles = {r: sorted(s["name"] for s in servers if r in s.get("roles", ())) for r in ("io", "meta")}
    found = {"io": f"SELECT DISTINCT server FROM ({DISK_DATA_SQL})",
             "meta": "SELECT DISTINCT server FROM server_ops WHERE layer = 'meta'"}
    for role, sql in found.items():
        if not roles[role]:
            roles[role] = sorted(s for (s,) in con.execute(sql).fetchall())
    return roles


#: Table macros every connection has.  ``islands(t)``: the rows of the table, view or CTE named ``t``
#: (columns ``k``, ``lo``, ``hi``: a key and a range [lo, hi), times or bytes; any others kept), each
#: with ``island``: ranges of one key that overlap share an island, numbered from 1 by ``lo``.
#: ``covered(t)``: per key, the length of the union of its ranges (e.g. a server's busy time).
MACROS_SQL = """
CREATE OR REPLACE TEMP MACRO islands(t) AS TABLE
    SELECT * EXCLUDE (before),
           sum(CASE WHEN before IS NULL OR lo >= before THEN 1 ELSE 0 END)
               OVER (PARTITION BY k ORDER BY lo, hi ROWS UNBOUNDED PRECEDING) AS island
    FROM (SELECT *, max(hi) OVER (PARTITION BY k ORDER BY lo, hi
                                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
          FROM query_table(t));
CREATE OR REPLACE TEMP MACRO covered(t) AS TABLE
    SELECT k, sum(e - s)::BIGINT AS covered
    FROM (SELECT k, island, min(lo) AS s, max(hi) AS e FROM islands(t) GROUP BY k, island)
    GROUP BY k;
"""


def connect(db: str, sandbox: bool = False) -> duckdb.DuckDBPyConnection:
    """Open a merged database read-only (a DuckDB file, or a directory of Parquet tables from
    ``callid merge --storage parquet``); :class:`InputError` if it is missing or not a complete one.

    ``sandbox`` (``callid sql``): the queries reach no file but the database's own (no ``COPY ... TO``,
    ``ATTACH``, ``INSTALL``/``LOAD``, file readers), and the configuration is locked.
    """
    con = open_merged(db)
    try:
        con.execute("SET enable_progress_bar = false")  # (DuckDB would draw it into stdout, amid the results)
        con.execute(MACROS_SQL)
        _check_complete(con, db)
        if sandbox:
            con.execute("SET enable_external_access = false")
            con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


def _check_complete(con: duckdb.DuckDBPyConnection, db: str) -> None:
    """:class:`InputError` unless every declared table and view is there with its columns, readable."""
    have: dict[str, set[str]] = {}
    columns = con.execute("SELECT table_name, column_name FROM information_schema.columns").fetchall()
    for table, column in columns:
        have.setdefault(table, set()).add(column)
    missing = [name for name in (*TABLES, *VIEWS) if name not in have]
    if missing:
        raise InputError(f"{db}: not a database written by 'callid merge' (no table '{missing[0]}')")
    for name in (*TABLES, *VIEWS):
        columns = [c.name for c in MERGED[name].columns if c.name not in have[name]]
        if columns:
            raise InputError(f"{db}: not a database written by this version of 'callid merge' (table "
                             f"'{name}' has no column '{columns[0]}')")
    try:
        con.execute("SELECT count(*) FROM run").fetchall()
    except duckdb.Error as exc:
        raise InputError(f"{db}: damaged ({str(exc).splitlines()[0]})") from None
    if Path(db).is_file():  # (a cut file opens, and fails only when a query reaches its end)
        (blocks,) = con.execute("SELECT block_size * total_blocks FROM pragma_database_size()").fetchone()
        if Path(db).stat().st_size < blocks:
            raise InputError(f"{db}: damaged (the file is {Path(db).stat().st_size} bytes, its database "
                             f"{blocks}: cut short?)")


def leading_comment(sql: str) -> list[str]:
    """The lines of a SQL text's leading ``--`` comment, without the dashes."""
    return [ln[2:].strip() for ln in itertools.takewhile(lambda ln: ln.startswith("--"), sql.splitlines())]


def header_fields(sql: str) -> dict[str, str]:
    """The ``-- key: value`` lines of a SQL text's leading comment (a check's or an insight's header)."""
    return {k.strip(): v.strip() for k, v in (ln.split(":", 1) for ln in leading_comment(sql) if ":" in ln)}


def select_codes(items: list, codes: list[str] | None, what: str) -> list:
    """The ``items`` (each with a ``code``) whose code is in ``codes`` (all if none given);
    :class:`BadValue` naming the codes there are if one is unknown."""
    if not codes:
        return items
    known = {i.code for i in items}
    unknown = [c for c in codes if c not in known]
    if unknown:
        raise BadValue(f"no {what} {', '.join(unknown)} ({what}s: {', '.join(sorted(known))})")
    return [i for i in items if i.code in codes]


@dataclass(frozen=True)
class NamedQuery:
    """A query that ships with callid (``pipeline/queries/NAME.sql``): the question it answers
    (its leading comment up to the first ``?``), the whole leading comment and its SQL."""

    name: str
    question: str
    description: str
    sql: str


def named_queries() -> dict[str, NamedQuery]:
    """The shipped queries by name, from their files' leading ``--`` comments and SQL."""
    out = {}
    for entry in sorted(resources.files("pipeline").joinpath("queries").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            sql = entry.read_text()
            name, text = entry.name.removesuffix(".sql"), " ".join(leading_comment(sql))
            out[name] = NamedQuery(name, text[:text.find("?") + 1] or text, text, sql)
    return out


def named_query(name: str) -> NamedQuery:
    """The shipped query ``name``; :class:`InputError` naming the others if there is none."""
    queries = named_queries()
    if name not in queries:
        raise InputError(f"no query named {name!r} (queries: {', '.join(queries)}; see --list-queries)")
    return queries[name]


def table_counts(db: str) -> list[tuple[str, str, int]]:
    """``(name, 'table' or 'view', rows)`` of every table and view a user queries (not the stored
    ``_name`` rows behind the views)."""
    con = connect(db)
    try:
        found = con.execute("""SELECT table_name, table_type FROM information_schema.tables
                               WHERE table_name NOT LIKE '\\_%' ESCAPE '\\' ORDER BY table_name""").fetchall()
        return [(name, "view" if kind == "VIEW" else "table",
                 con.execute(f'SELECT count(*) FROM "{name}"').fetchall()[0][0]) for name, kind in found]
    finally:
        con.close()


class QueryError(InputError):
    """A query that failed or was refused; the message says why."""


def _run(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[list[str], list[tuple]]:
    try:
        cur = con.execute(sql)
        if cur.description is None:
            return [], []
        return [d[0] for d in cur.description], cur.fetchall()
    except duckdb.PermissionException as exc:
        raise QueryError(f"refused: callid sql reads the database only ({str(exc).splitlines()[0]})") \
            from None
    except duckdb.Error as exc:
        raise QueryError(f"SQL error: {str(exc).splitlines()[0]}") from None


def run_query(db: str, sql: str) -> tuple[list[str], list[tuple]]:
    """Run ``sql`` (in :func:`connect`'s sandbox); return column names and rows.  A failed or refused
    query is a :class:`QueryError`."""
    con = connect(db, sandbox=True)
    try:
        return _run(con, sql)
    finally:
        con.close()


@contextmanager
def open_query_session(db: str) -> Iterator[Callable[[str], tuple[list[str], list[tuple]]]]:
    """Run many queries on one sandboxed connection (the interactive shell): yields ``run(sql)``."""
    con = connect(db, sandbox=True)
    try:
        yield lambda sql: _run(con, sql)
    finally:
        con.close()


def _cell(value: object) -> str:
    return "" if value is None else str(value)


#: widest cell of a table for people (csv, json and markdown keep every character)
MAX_CELL = 60


def _fit(text: str) -> str:
    """One line of at most :data:`MAX_CELL` characters: a longer value is cut with its length said."""
    text = text.replace("\n", " ")
    if len(text) <= MAX_CELL:
        return text
    more = f"… ({len(text)} chars)"
    return text[:MAX_CELL - len(more)] + more


def _widths(columns: list[str], cells: list[list[str]]) -> list[int]:
    return [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]


def format_rows(columns: list[str], rows: list[tuple], fmt: str = "table") -> str:
    """Render a result for people (``table``, ``markdown``) or programs (``csv``, ``json``)."""
    if fmt == "json":  # (integers beyond 2^53 as strings: exact for JavaScript readers)
        return jsonout.dumps([dict(zip(columns, row)) for row in rows])
    cells = [[_cell(v) for v in row] for row in rows]
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(cells)
        return buf.getvalue().rstrip("\n")
    if fmt == "markdown":
        cells = [[v.replace("|", "\\|").replace("\n", " ") for v in row] for row in cells]
        widths = _widths(columns, cells)
        line = lambda vals: "| " + " | ".join(v.ljust(w) for v, w in zip(vals, widths)) + " |"  # noqa: E731
        return "\n".join([line(columns), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
                          *map(line, cells)])
    if fmt != "table":
        raise InputError(f"unknown format {fmt!r}: choose {listed(RowFormat)}")
    cells = [[_fit(v) for v in row] for row in cells]
    widths = _widths(columns, cells)
    line = lambda vals: "  ".join(v.rjust(w) if _numeric(v) else v.ljust(w)  # noqa: E731
                                  for v, w in zip(vals, widths)).rstrip()
    out = [line(columns), "  ".join("-" * w for w in widths), *map(line, cells)]
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
