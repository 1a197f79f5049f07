"""``callid sql``: the queries that ship with callid, and any query run in the sandbox of a merged output."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources

import duckdb

from callid_core.config import MAX_TIMEOUT
from callid_core.errors import InputError
from pipeline.merged import Merged
from pipeline.rules import leading_comment


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


def table_counts(m: Merged) -> list[tuple[str, str, int]]:
    """``(name, 'table' or 'view', rows)`` of every table and view a user queries (not the stored
    ``_name`` rows behind the views)."""
    found = m.rows("""SELECT table_name, table_type FROM information_schema.tables
                      WHERE table_name NOT LIKE '\\_%' ESCAPE '\\' ORDER BY table_name""")
    return [(name, "view" if kind == "VIEW" else "table", m.rows(f'SELECT count(*) FROM "{name}"')[0][0])
            for name, kind in found]


class QueryError(InputError):
    """A query that failed or was refused; the message says why."""


#: what ``callid sql`` runs: queries (SELECT, as DuckDB also reads SHOW, DESCRIBE, SUMMARIZE, VALUES and
#: FROM first) and EXPLAIN of them; nothing else (COPY ... TO could write even the output's own files,
#: the only ones the sandbox lets it reach)
QUERY_STATEMENTS = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})


#: rows fetched at a time: a result is never held whole
BATCH_ROWS = 10_000


def run_query(m: Merged, sql: str) -> tuple[list[str], list[tuple]]:
    """Run ``sql`` on ``m`` (opened with ``sandbox=True`` for ``callid sql``); return column names and
    rows.  A failed or refused query (any statement but a query) is a :class:`QueryError`."""
    columns, batches = stream_query(m, sql)
    return columns, [row for batch in batches for row in batch]


def stream_query(
    m: Merged, sql: str, timeout: float | None = None,
) -> tuple[list[str], Iterator[list[tuple]]]:
    """As :func:`run_query`, the rows in batches of :data:`BATCH_ROWS` as they are fetched; a query
    still running ``timeout`` seconds after it started is stopped (:class:`QueryError`; 0 or None:
    never; at most :data:`~callid_core.config.MAX_TIMEOUT`)."""
    check_timeout(timeout)
    try:
        refused = [st.type.name for st in m.con.extract_statements(sql) if st.type not in QUERY_STATEMENTS]
    except duckdb.Error as exc:
        raise _error(exc) from None
    if refused:
        raise QueryError(f"refused: callid sql runs queries only (SELECT, SHOW, DESCRIBE, EXPLAIN ...), "
                         f"not {refused[0]}")
    deadline = _Deadline(m, timeout)
    try:
        cur = m.con.execute(sql)
    except duckdb.Error as exc:
        deadline.cancel()
        raise deadline.error(exc) from None
    if cur.description is None:
        deadline.cancel()
        return [], iter(())
    return [d[0] for d in cur.description], _batches(cur, deadline)


def check_timeout(timeout: float | None) -> None:
    """:class:`QueryError` unless ``timeout`` is None or 0 (never) to 30 days, in seconds."""
    if timeout is not None and not 0 <= timeout <= MAX_TIMEOUT:
        raise QueryError(f"--timeout: {timeout:g} s is not between 0 (never) and {MAX_TIMEOUT:.0f} s "
                         "(30 days)")


def _batches(cur: duckdb.DuckDBPyConnection, deadline: _Deadline) -> Iterator[list[tuple]]:
    try:
        while batch := cur.fetchmany(BATCH_ROWS):
            yield batch
    except duckdb.Error as exc:
        raise deadline.error(exc) from None
    finally:
        deadline.cancel()


class _Deadline:
    """Interrupts the queries of ``m`` once ``timeout`` seconds have passed (none: never)."""

    def __init__(self, m: Merged, timeout: float | None) -> None:
        self.timeout, self.fired = timeout, False
        self._timer = threading.Timer(timeout, self._fire, (m,)) if timeout else None
        if self._timer:
            self._timer.daemon = True
            self._timer.start()

    def _fire(self, m: Merged) -> None:
        self.fired = True
        m.con.interrupt()

    def cancel(self) -> None:
        if self._timer:
            self._timer.cancel()

    def error(self, exc: duckdb.Error) -> QueryError:
        """What ``exc``, raised by a query, says to the user."""
        return QueryError(f"stopped after {self.timeout:g} s (--timeout)") if self.fired else _error(exc)


def _error(exc: duckdb.Error) -> QueryError:
    if isinstance(exc, duckdb.PermissionException):
        return QueryError(f"refused: callid sql reads the database only ({str(exc).splitlines()[0]})")
    return QueryError(f"SQL error: {str(exc).splitlines()[0]}")
