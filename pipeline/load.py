"""Load step: find a log's files and validate them against ``pipeline.schema`` (footers only)."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import schema as S
from pipeline.errors import InputError


@dataclass(frozen=True)
class LogInfo:
    """A validated log: its files and the metadata they agree on."""

    kind: str
    files: list[str]
    layout: str
    run_id: str
    config: str
    rows: int

    @property
    def total_bits(self) -> int:
        return int(self.layout.split("/")[0])

    @property
    def rank_bits(self) -> int:
        return int(self.layout.split("/")[1])


def resolve(spec: str) -> list[str]:
    """A file, a directory of ``*.parquet`` parts, or a glob -> the sorted files."""
    path = Path(spec)
    if path.is_dir():
        files = sorted(str(p) for p in path.glob("*.parquet"))
        if not files:
            raise InputError(f"{spec}: directory holds no .parquet files")
        return files
    if any(ch in spec for ch in "*?["):
        files = sorted(glob.glob(spec))
        if not files:
            raise InputError(f"{spec}: no file matches")
        return files
    if not path.exists():
        raise InputError(f"{spec}: no such file")
    return [spec]


def _check_file(path: str, kind: str) -> tuple[dict[bytes, bytes], int]:
    if os.path.getsize(path) == 0:
        raise InputError(f"{path}: empty file, expected a {kind} log")
    try:
        meta = pq.read_metadata(path)
        schema = pq.read_schema(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"{path}: not a Parquet file ({str(exc).splitlines()[0]})") from None
    kv = schema.metadata or {}
    found = kv.get(S.META_KIND.encode(), b"").decode()
    if not found:
        raise InputError(f"{path}: not a callid log (no '{S.META_KIND}' metadata)")
    if found != kind:
        raise InputError(f"{path}: is a {found} log, expected a {kind} log")
    expected = S.SCHEMAS[kind]
    for field in expected:
        idx = schema.get_field_index(field.name)
        if idx < 0:
            raise InputError(f"{path}: missing column '{field.name}'")
        got = schema.field(idx).type
        if got != field.type:
            raise InputError(f"{path}: column '{field.name}' has type {got}, expected {field.type}")
    layout = kv.get(S.META_LAYOUT.encode(), b"").decode()
    try:
        total, rank = (int(x) for x in layout.split("/"))
        if total not in (32, 64) or not 0 < rank < total:
            raise ValueError
    except ValueError:
        raise InputError(f"{path}: bad CallID layout metadata {layout!r}") from None
    return kv, meta.num_rows


def validate_log(spec: str, kind: str) -> LogInfo:
    """Validate every file of a log of ``kind`` ('client' or 'server'); raise :class:`InputError`."""
    files = resolve(spec)
    rows = 0
    first: dict[bytes, bytes] | None = None
    for path in files:
        kv, n = _check_file(path, kind)
        rows += n
        if first is None:
            first = kv
            continue
        for key in (S.META_LAYOUT, S.META_RUN_ID):
            if kv.get(key.encode()) != first.get(key.encode()):
                raise InputError(f"{path}: '{key}' differs from {files[0]}")
    assert first is not None
    get = lambda key: first.get(key.encode(), b"").decode()  # noqa: E731
    return LogInfo(kind, files, get(S.META_LAYOUT), get(S.META_RUN_ID), get(S.META_CONFIG), rows)
