"""Rows of a query result for people (``table``, ``markdown``) or programs (``csv``, ``json``)."""

from __future__ import annotations

import csv
import functools
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
    head, marker, tail = _cut(len(text))
    return text[:head] + marker + text[len(text) - tail:]


@functools.lru_cache(maxsize=256)
def _cut(n: int) -> tuple[int, str, int]:
    """How :func:`_fit` cuts a value of ``n`` characters: the characters kept at its start, the marker,
    the characters kept at its end."""
    marker = f"…{n} chars more…"
    keep = MAX_CELL - len(marker)
    marker = f"…{n - keep} chars more…"
    return keep // 2, marker, keep - keep // 2


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
    """A table or markdown, in blocks (each batch column by column)."""
    n, widths = 0, None
    for batch in filter(None, batches):
        texts = [_texts(values, fmt, cut) for values in zip(*batch)]
        n += len(batch)
        if widths is None:
            widths = [max(len(c), max(map(len, t), default=0)) for c, t in zip(columns, texts)]
            yield _head(columns, widths, fmt)
        yield "\n".join(_lines(texts, widths, fmt))
    if widths is None:
        yield _head(columns, [len(c) for c in columns], fmt)
    if fmt == "table":
        yield f"({n} row{'s' if n != 1 else ''})"


def _texts(values: tuple, fmt: str, cut: bool) -> list[str]:
    """A column's cells as text on one line: markdown's ``|`` escaped; a table's cut to
    :data:`MAX_CELL` characters when ``cut``."""
    texts = [_cell(v) for v in values]
    if fmt == "markdown":
        return [t.replace("|", "\\|").replace("\n", " ") for t in texts]
    if cut:
        return [_fit(t) if len(t) > MAX_CELL or "\n" in t else t for t in texts]
    return [t.replace("\n", " ") for t in texts]


def _lines(texts: list[list[str]], widths: list[int], fmt: str) -> Iterator[str]:
    """The rows of a block, its columns padded to ``widths`` (a table's numbers to the right)."""
    if fmt == "markdown":
        padded = [[t.ljust(w) for t in column] for column, w in zip(texts, widths)]
        return ("| " + " | ".join(row) + " |" for row in zip(*padded))
    padded = [[t.rjust(w) if _numeric(t) else t.ljust(w) for t in column] for column, w in zip(texts, widths)]
    return ("  ".join(row).rstrip() for row in zip(*padded))


def _json(columns: list[str], batches: Iterable[list[tuple]]) -> Iterator[str]:
    """A JSON list of the rows as objects, a block per batch (the last one holding the closing ``]``)."""
    pending = None
    for batch in batches:
        if batch:
            if pending is not None:
                yield pending
            pending = ("[" if pending is None else ", ") + jsonout.dumps(
                [dict(zip(columns, row)) for row in batch])[1:-1]  # (one dumps: its items, ", " between)
    yield (pending or "[") + "]"


def _csv(columns: list[str], batches: Iterable[list[tuple]]) -> Iterator[str]:
    """CSV, in blocks (the first: the header)."""
    for rows in itertools.chain([[columns]], batches):
        if rows:
            buf = io.StringIO()
            csv.writer(buf, lineterminator="\n").writerows(rows)  # (None as '', the rest as str() says)
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
    first = text.lstrip()[:1]  # (what float() reads starts with a digit, a sign, a point, inf or nan:
    if not (first.isdigit() or first in "+-.iInN"):  # most texts are told apart without an exception)
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True
