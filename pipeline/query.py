"""Run SQL on a merged database and format the result (table, csv, json, markdown)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import duckdb

from pipeline.errors import InputError

FORMATS = ("table", "csv", "json", "markdown")


def connect(db: str) -> duckdb.DuckDBPyConnection:
    """Open a merged database read-only (a DuckDB file, or a directory of Parquet tables from
    ``callid merge --format parquet``); :class:`InputError` if it is missing or not one."""
    if Path(db).is_dir():
        con = duckdb.connect()
        for table in sorted(Path(db).glob("*.parquet")):
            path = str(table).replace("'", "''")
            con.execute(f'CREATE VIEW "{table.stem}" AS SELECT * FROM read_parquet(\'{path}\')')
    elif not Path(db).is_file():
        raise InputError(f"{db}: no such file")
    else:
        con = None
    try:
        con = con or duckdb.connect(db, read_only=True)
    except duckdb.Error:
        raise InputError(f"{db}: not a database written by 'callid merge' (DuckDB cannot open it)") from None
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    tables |= {r[0] for r in con.execute("SELECT view_name FROM duckdb_views()").fetchall()}
    if not {"calls", "server_ops", "arrows"} <= tables:
        con.close()
        raise InputError(f"{db}: not a database written by 'callid merge' (no table 'arrows')")
    return con


def run_query(db: str, sql: str) -> tuple[list[str], list[tuple]]:
    """Run ``sql``; return column names and rows.  SQL errors become :class:`InputError`."""
    con = connect(db)
    try:
        cur = con.execute(sql)
        if cur.description is None:
            return [], []
        return [d[0] for d in cur.description], cur.fetchall()
    except duckdb.Error as exc:
        raise InputError(f"SQL error: {str(exc).splitlines()[0]}") from None
    finally:
        con.close()


def _cell(value: object) -> str:
    return "" if value is None else str(value)


def format_rows(columns: list[str], rows: list[tuple], fmt: str = "table") -> str:
    """Render a result for people (``table``, ``markdown``) or programs (``csv``, ``json``)."""
    if fmt == "json":
        return json.dumps([dict(zip(columns, row)) for row in rows], default=str)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[_cell(v) for v in row] for row in rows])
        return buf.getvalue().rstrip("\n")
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    if fmt == "markdown":
        line = lambda vals: "| " + " | ".join(v.ljust(w) for v, w in zip(vals, widths)) + " |"  # noqa: E731
        return "\n".join([line(columns), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
                          *map(line, cells)])
    if fmt != "table":
        raise InputError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}")
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
