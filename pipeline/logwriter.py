"""Incremental columnar logs: rows are appended to column lists and flushed as Parquet part files.

Each flush writes one complete part file (temporary name, then rename), so a
process that is killed loses at most the rows appended since its last flush,
and every part already written stays readable.  Used by the client trace and
the server event log; :func:`combine_parts` joins the parts of a run into one file.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import schema as S

DEFAULT_FLUSH_ROWS = 4096


def file_metadata(kind: str, layout: str, run_id: str, config_json: str) -> dict[bytes, bytes]:
    """The key/value metadata every log file carries."""
    return {
        S.META_SCHEMA_VERSION.encode(): S.SCHEMA_VERSION.encode(),
        S.META_KIND.encode(): kind.encode(),
        S.META_LAYOUT.encode(): layout.encode(),
        S.META_RUN_ID.encode(): run_id.encode(),
        S.META_CONFIG.encode(): config_json.encode(),
    }


class PartLog:
    """An append-only log of rows of ``schema``, flushed every ``flush_rows`` rows."""

    def __init__(
        self,
        schema: pa.Schema,
        directory: str | os.PathLike[str],
        stem: str,
        metadata: dict[bytes, bytes],
        flush_rows: int = DEFAULT_FLUSH_ROWS,
    ) -> None:
        self.schema = schema.with_metadata(metadata)
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.stem = stem
        self.flush_rows = flush_rows
        self._columns: list[list] = [[] for _ in schema]
        self._parts = 0
        self._rows = 0
        self._lock = threading.Lock()

    def append(self, row: Sequence) -> None:
        """Append one row given in schema order."""
        with self._lock:
            for column, value in zip(self._columns, row, strict=True):
                column.append(value)
            self._rows += 1
            full = self._rows >= self.flush_rows
        if full:
            self.flush()

    def flush(self) -> Path | None:
        """Write the rows appended so far as one part file; return its path."""
        with self._lock:
            if not self._rows:
                return None
            columns, self._columns = self._columns, [[] for _ in self.schema]
            self._rows = 0
            part = self._parts
            self._parts += 1
        table = pa.Table.from_arrays(
            [pa.array(col, type=field.type) for col, field in zip(columns, self.schema)],
            schema=self.schema,
        )
        path = self.directory / f"{self.stem}.{part:06d}.parquet"
        tmp = path.with_suffix(".tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, path)
        return path

    def close(self) -> None:
        """Flush what is left."""
        self.flush()


def combine_parts(
    parts: Iterable[str | os.PathLike[str]], out: str | os.PathLike[str], schema: pa.Schema,
    metadata: dict[bytes, bytes],
) -> int:
    """Concatenate part files into ``out`` (written under a temporary name); return the row count."""
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    rows = 0
    schema = schema.with_metadata(metadata)
    with pq.ParquetWriter(tmp, schema) as writer:
        for part in sorted(map(str, parts)):
            table = pq.read_table(part, schema=schema)
            rows += table.num_rows
            writer.write_table(table.replace_schema_metadata(metadata))
    os.replace(tmp, out)
    return rows
