"""Rows of a query result for people (``table``, ``markdown``) or programs (``csv``, ``json``)."""

from __future__ import annotations

import csv
import io

from callid_core import jsonout
from callid_core.choices import RowFormat, listed
from callid_core.errors import InputError

__all__ = ["MAX_CELL", "format_rows"]


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
