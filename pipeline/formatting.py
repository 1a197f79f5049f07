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
    """One line of at most :data:`MAX_CELL` characters: a longer value is cut in the middle (its start
    and its end kept: values that differ at their end, as paths do, stay apart), saying how many
    characters are left out."""
    text = text.replace("\n", " ")
    if len(text) <= MAX_CELL:
        return text
    keep = MAX_CELL - len(f"…{len(text)} chars more…")
    head = keep // 2
    return f"{text[:head]}…{len(text) - keep} chars more…{text[len(text) - (keep - head):]}"


def _widths(columns: list[str], cells: list[list[str]]) -> list[int]:
    return [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]


def format_rows(columns: list[str], rows: list[tuple], fmt: str = "table", cut: bool = True) -> str:
    """Render a result for people (``table``, ``markdown``) or programs (``csv``, ``json``); ``cut``: a
    table's wide values are cut to :data:`MAX_CELL` characters."""
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
    cells = [[_fit(v) if cut else v.replace("\n", " ") for v in row] for row in cells]
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
