"""Incremental columnar logs: rows are appended in batches and flushed as Parquet part files.

Each flush writes one complete part file (temporary name, then rename), so a
process that is killed loses at most the rows appended since its last flush,
and every part already written stays readable.  Rows are flushed by count (a part
holds about ``flush_rows``) and by time: a row waits at most ``flush_seconds`` before it
is on disk, so a killed process loses about a second of events whatever their number.
Used by the client trace and the server event log; :func:`combine_parts` joins the parts
of a run into one file.
Rows are tuples in schema order, made by the builders of :class:`callid_core.schema.Table`.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from callid_core import checksum
from callid_core.atomic import replacing
from callid_core.config import DEFAULT_FLUSH_ROWS, DEFAULT_FLUSH_SECONDS
from callid_core.errors import InputError
from callid_core.schema import META_CHECKSUM

__all__ = ["PartLog", "column", "combine_parts", "is_part"]


def is_part(name: str, stem: str) -> bool:
    """Is ``name`` the name of a part file of the log ``stem`` (as :class:`PartLog` names them)?"""
    return re.fullmatch(rf"{re.escape(stem)}\.\d{{6,}}\.parquet", name) is not None


class PartLog:
    """An append-only log of rows of ``schema``, written as part files of about ``flush_rows`` rows.

    ``append`` is one list append (atomic, no lock): a row is a tuple in schema order
    (:attr:`callid_core.schema.Table.row`).  A part is *sealed* once it holds ``flush_rows``
    rows or on :meth:`flush`; until then a timer thread (started at the first append) rewrites
    the open part every ``flush_seconds`` with the rows appended since (temporary name, then
    rename: the last whole version stays), so rows are never more than that long in memory
    only, and the number of parts does not grow with the run's length.  A write turns the rows
    into Arrow columns at once (``zip`` and numpy, no per-value Python code).  Part files are
    intermediate (:func:`combine_parts` rewrites them), so they are written uncompressed,
    without statistics and without dictionaries.  Thread-safe.
    """

    def __init__(
        self,
        schema: pa.Schema,
        directory: str | os.PathLike[str],
        stem: str,
        metadata: dict[bytes, bytes],
        flush_rows: int = DEFAULT_FLUSH_ROWS,
        flush_seconds: float = DEFAULT_FLUSH_SECONDS,
    ) -> None:
        """``flush_seconds`` 0: rows are written only by count and by :meth:`flush`."""
        self.schema = schema.with_metadata(metadata)
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.stem = stem
        self.flush_rows = flush_rows
        self.flush_seconds = flush_seconds
        self._rows: list[Sequence] = []  # never replaced: flushes cut rows from its front
        self._open: list[Sequence] = []  # the rows already in the open part (written, not sealed)
        self._parts = 0  # sealed parts; the open part is the next
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None

    def append(self, row: Sequence) -> None:
        """Append one row (a tuple in schema order)."""
        rows = self._rows
        rows.append(row)
        if len(rows) >= self.flush_rows:
            self._flush(self.flush_rows, seal=True)
        elif self._timer is None and self.flush_seconds > 0:
            self._start_timer()

    def flush(self) -> Path | None:
        """Write the rows appended so far and seal their part; return its path (None: no rows)."""
        return self._flush(1, seal=True)

    def _start_timer(self) -> None:
        with self._lock:
            if self._timer is None and not self._stop.is_set():
                self._timer = threading.Thread(target=self._tick, name=f"{self.stem}-flush", daemon=True)
                self._timer.start()

    def _tick(self) -> None:
        while not self._stop.wait(self.flush_seconds):
            try:
                self._flush(1, seal=False)
            except (OSError, InputError, ValueError):  # (a failed write: the rows wait, and the next flush
                pass                                       # by count or close says why)

    def _flush(self, at_least: int, seal: bool) -> Path | None:
        with self._lock:  # one writer at a time; appends go on (to the list's end)
            n = len(self._rows)
            if n < at_least:
                if seal and self._open:  # (its rows are on disk already, written by time)
                    self._parts += 1
                    self._open = []
                    return self._part(self._parts - 1)
                return None
            new = self._rows[:n]
            del self._rows[:n]
            if set(map(len, new)) != {len(self.schema)}:
                raise ValueError(f"{self.stem}: rows must have the {len(self.schema)} columns of the schema")
            rows = self._open + new
            columns = [column(values, field.type) for values, field in zip(zip(*rows), self.schema)]
            path = self._part(self._parts)
            try:
                with replacing(path) as tmp:
                    pq.write_table(pa.Table.from_arrays(columns, schema=self.schema), tmp, compression="none",
                                   write_statistics=False, use_dictionary=False)
            except (OSError, InputError):  # (a full disk, no descriptor, no directory): rows wait
                self._rows[0:0] = new
                raise
            if seal or len(rows) >= self.flush_rows:
                self._parts += 1
                self._open = []
            else:
                self._open = rows
        return path

    def _part(self, index: int) -> Path:
        return self.directory / f"{self.stem}.{index:06d}.parquet"

    def parts(self) -> list[Path]:
        """The sealed part files of this log in its directory (written whole: a part being written has
        another name), in order.  (The open part is rewritten until sealed: it is not listed.)"""
        with self._lock:
            sealed = self._parts
        return sorted(p for p in self.directory.glob(f"{self.stem}.*.parquet")
                      if is_part(p.name, self.stem) and int(p.name.split(".")[-2]) < sealed)

    def close(self) -> None:
        """Stop the timer and write what is left."""
        self._stop.set()
        if self._timer is not None and self._timer is not threading.current_thread():
            self._timer.join()
        self.flush()


class _LogWriter(pq.ParquetWriter):
    """A Parquet writer that ends its file with a checksum (:mod:`callid_core.checksum`)."""

    def close(self) -> None:
        if self.is_open:
            self.add_key_value_metadata({META_CHECKSUM: checksum.PLACEHOLDER})
            super().close()
            checksum.seal(self.where)


def log_writer(where: str | os.PathLike[str], schema: pa.Schema) -> pq.ParquetWriter:
    """A writer of a log as ``callid merge`` reads it: integers delta-encoded, labels
    dictionary-encoded, Parquet 2 data pages, row groups of a million rows, a checksum of the whole
    file in its footer.  (A merged output's views read the log itself: half the size of pyarrow's
    defaults, and a scan of the times in half the time; ``bench merge``, 10 M events: busy time per
    server 1.44x a DuckDB table's, 2.9x before; bytes per server 1.7x, 1.4x before.)"""
    ints = [f.name for f in schema if pa.types.is_integer(f.type)]
    return _LogWriter(where, schema, data_page_version="2.0",
                      use_dictionary=[f.name for f in schema if pa.types.is_string(f.type)],
                      column_encoding=dict.fromkeys(ints, "DELTA_BINARY_PACKED"))


#: rows per row group of a log (its unit of parallel reading)
LOG_ROW_GROUP = 1 << 20


def combine_parts(
    parts: Iterable[str | os.PathLike[str]], out: str | os.PathLike[str], schema: pa.Schema,
    metadata: dict[bytes, bytes],
) -> int:
    """Concatenate part files into ``out`` (written under a temporary name); return the row count."""
    rows = 0
    schema = schema.with_metadata(metadata)
    with replacing(out) as tmp, log_writer(tmp, schema) as writer:
        for part in sorted(map(str, parts)):
            table = pq.read_table(part, schema=schema)
            rows += table.num_rows
            writer.write_table(table.replace_schema_metadata(metadata), row_group_size=LOG_ROW_GROUP)
    return rows


# Columns are built from buffers (numpy), never with ``pa.array`` on Python objects: that
# is slower per value and makes pyarrow import pandas (about 0.3 s) at a process's first flush.
_INTS = {pa.int32(): np.int32, pa.int64(): np.int64, pa.uint64(): np.uint64}


def column(values: Sequence, type_: pa.DataType) -> pa.Array:
    """An Arrow array of ``type_`` from Python values (None: null), without per-value Python code."""
    n = len(values)
    validity = None
    if pa.types.is_list(type_) and not any(values) and values.count(None) == 0:
        # (the usual list column: every list empty)
        offsets = pa.py_buffer(np.zeros(n + 1, np.int32))
        return pa.Array.from_buffers(type_, n, [None, offsets], children=[pa.nulls(0, type_.value_type)])
    if (n and values[0] is None) or pa.types.is_boolean(type_) or pa.types.is_list(type_):
        # (often a column of nulls: counted at once; numpy would take None for False)
        nulls = values.count(None)
    else:
        try:  # the common case: no nulls
            return _column(values, type_, n, None)
        except TypeError:
            nulls = values.count(None)
    if nulls == n:
        return pa.nulls(n, type_)
    if nulls:
        obj = np.array(values, dtype=object)
        valid = np.not_equal(obj, np.array(None, dtype=object))
        obj[~valid] = "" if pa.types.is_string(type_) else 0
        values = obj.tolist()
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
        if pa.types.is_list(type_):
            return pa.array(values, type=type_, mask=~valid)
    return _column(values, type_, n, validity)


def _column(values: Sequence, type_: pa.DataType, n: int, validity: pa.Buffer | None) -> pa.Array:
    """Values without None (nulls already replaced, ``validity`` says where)."""
    if type_ in _INTS:
        data = np.array(values, dtype=_INTS[type_])
        return pa.Array.from_buffers(type_, n, [validity, pa.py_buffer(data)])
    if pa.types.is_boolean(type_):
        bits = np.packbits(np.array(values, dtype=bool), bitorder="little")
        return pa.Array.from_buffers(type_, n, [validity, pa.py_buffer(bits)])
    if pa.types.is_string(type_):
        text = "".join(values)
        if text.isascii():
            chars, sizes = text.encode("ascii"), map(len, values)
        else:
            encoded = [v.encode() for v in values]
            chars, sizes = b"".join(encoded), map(len, encoded)
        return pa.Array.from_buffers(type_, n, [validity, _offsets(sizes, n), pa.py_buffer(chars)])
    if pa.types.is_list(type_) and type_.value_type in _INTS:
        flat = np.fromiter(itertools.chain.from_iterable(values), _INTS[type_.value_type])
        items = pa.Array.from_buffers(type_.value_type, len(flat), [None, pa.py_buffer(flat)])
        return pa.Array.from_buffers(type_, n, [validity, _offsets(map(len, values), n)], children=[items])
    raise TypeError(f"no column builder for {type_}")


def _offsets(sizes: Iterable[int], n: int) -> pa.Buffer:
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.fromiter(sizes, np.int64, n), out=offsets[1:])
    return pa.py_buffer(offsets)
