"""``callid sql``: the queries that ship with callid, and any query run in the sandbox of a merged output."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import duckdb

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


def run_query(m: Merged, sql: str) -> tuple[list[str], list[tuple]]:
    """Run ``sql`` on ``m`` (opened with ``sandbox=True`` for ``callid sql``); return column names and
    rows.  A failed or refused query (any statement but a query) is a :class:`QueryError`."""
    try:
        refused = [st.type.name for st in m.con.extract_statements(sql) if st.type not in QUERY_STATEMENTS]
        if refused:
            raise QueryError(f"refused: callid sql runs queries only (SELECT, SHOW, DESCRIBE, EXPLAIN ...), "
                             f"not {refused[0]}")
        cur = m.con.execute(sql)
        if cur.description is None:
            return [], []
        return [d[0] for d in cur.description], cur.fetchall()
    except duckdb.PermissionException as exc:
        raise QueryError(f"refused: callid sql reads the database only ({str(exc).splitlines()[0]})") \
            from None
    except duckdb.Error as exc:
        raise QueryError(f"SQL error: {str(exc).splitlines()[0]}") from None
