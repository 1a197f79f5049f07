"""Rows of a query result for people (``table``, ``markdown``) or programs (``csv``, ``json``)."""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Iterable, Iterator

from callid_core import jsonout
from callid_core.choices import RowFormat, listed
from callid_core.errors import InputError

__all__ = ["MAX_CELL", "format_rows", "stream_rows"]


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
    return "\n".join(stream_rows(columns, [rows], fmt, cut))


def stream_rows(columns: list[str], batches: Iterable[list[tuple]], fmt: str = "table",
                cut: bool = True) -> Iterator[str]:
    """:func:`format_rows` of a result read in batches, as blocks of whole lines (no final newline),
    one per batch: nothing but a batch is held.  A table's (and markdown's) column widths are those
    of its first batch: a wider value further on is not cut to it."""
    if fmt not in set(RowFormat):
        raise InputError(f"unknown format {fmt!r}: choose {listed(RowFormat)}")
    if fmt == "json":  # (integers beyond 2^53 as strings: exact for JavaScript readers)
        return _json(columns, batches)
    if fmt == "csv":
        return _csv(columns, batches)
    return _aligned(columns, batches, fmt, cut)


def _aligned(columns: list[str], batches: Iterable[list[tuple]], fmt: str, cut: bool) -> Iterator[str]:
    """A table or markdown, in blocks."""
    n, widths = 0, None
    for batch in batches:
        cells = [[_cell(v) for v in row] for row in batch]
        n += len(cells)
        if fmt == "markdown":
            cells = [[v.replace("|", "\\|").replace("\n", " ") for v in row] for row in cells]
        else:
            cells = [[_fit(v) if cut else v.replace("\n", " ") for v in row] for row in cells]
        if widths is None:
            widths = _widths(columns, cells)
            yield _head(columns, widths, fmt)
        if cells:
            yield "\n".join(_line(row, widths, fmt) for row in cells)
    if widths is None:
        yield _head(columns, _widths(columns, []), fmt)
    if fmt == "table":
        yield f"({n} row{'s' if n != 1 else ''})"


def _json(columns: list[str], batches: Iterable[list[tuple]]) -> Iterator[str]:
    """A JSON list of the rows as objects, a block per batch (the last one holding the closing ``]``)."""
    pending = None
    for batch in batches:
        if batch:
            if pending is not None:
                yield pending
            pending = ("[" if pending is None else ", ") + ", ".join(
                jsonout.dumps(dict(zip(columns, row))) for row in batch)
    yield (pending or "[") + "]"


def _csv(columns: list[str], batches: Iterable[list[tuple]]) -> Iterator[str]:
    """CSV, in blocks (the first: the header)."""
    for rows in itertools.chain([[columns]], batches):
        if rows:
            buf = io.StringIO()
            csv.writer(buf, lineterminator="\n").writerows([_cell(v) for v in row] for row in rows)
            yield buf.getvalue().rstrip("\n")


def _head(columns: list[str], widths: list[int], fmt: str) -> str:
    if fmt == "markdown":
        return _line(columns, widths, fmt) + "\n|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return _line(columns, widths, fmt) + "\n" + "  ".join("-" * w for w in widths)


def _line(values: list[str], widths: list[int], fmt: str) -> str:
    if fmt == "markdown":
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths)) + " |"
    return "  ".join(v.rjust(w) if _numeric(v) else v.ljust(w) for v, w in zip(values, widths)).rstrip()


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
