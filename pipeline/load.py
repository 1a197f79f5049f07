"""Load step: find a log's files and validate them against ``callid_core.schema`` (footers only)."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from callid_core import schema as S
from callid_core.errors import InputError
from callid_core.ids import CallIDError, Layout

_META_PREFIX = "callid."


@dataclass(frozen=True)
class LogInfo:
    """A validated log: its files and the metadata they agree on."""

    kind: str
    files: list[str]
    layout: str
    run_id: str
    config: str
    rows: int
    #: every ``callid.*`` key/value of the first file, without the ``callid.`` prefix
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def callid_layout(self) -> Layout:
        """The CallID layout of the log (validated)."""
        return Layout.parse(self.layout)


def resolve(spec: str) -> list[str]:
    """A file, a directory of ``*.parquet`` parts, or a glob -> the sorted files."""
    path = Path(spec)
    if path.is_dir():
        files = sorted(str(p) for p in path.glob("*.parquet") if p.is_file())
        if not files:
            raise InputError(f"{spec}: directory holds no .parquet files")
        return files
    if path.exists():
        return [spec]
    if any(ch in spec for ch in "*?["):
        files = sorted(f for f in glob.glob(spec) if os.path.isfile(f))
        if not files:
            raise InputError(f"{spec}: no file matches")
        return files
    raise InputError(f"{spec}: no such file")


_LISTS = tuple(getattr(pa, n) for n in ("ListType", "LargeListType", "ListViewType") if hasattr(pa, n))
_STRINGS = {pa.string(), pa.large_string(), *([pa.string_view()] if hasattr(pa, "string_view") else [])}


def _normal(type_: pa.DataType) -> object:
    """A type without what does not matter to the readers (list item name and nullability,
    large and view variants of strings and lists)."""
    if isinstance(type_, _LISTS):
        return ("list", _normal(type_.value_type))
    return "string" if type_ in _STRINGS else type_


def check_layout(layout: str, where: str) -> None:
    """A CallID layout that :class:`callid_core.ids.Layout` accepts."""
    if not layout:
        raise InputError(f"{where}: no '{S.META_LAYOUT}' metadata (CallID layout)")
    try:
        Layout.parse(layout)
    except CallIDError as exc:
        raise InputError(f"{where}: unknown CallID layout {layout!r} in '{S.META_LAYOUT}' ({exc})") from None


def _check_file(path: str, kind: str) -> tuple[dict[str, str], int]:
    """Validate one file's footer; return its ``callid.*`` metadata and row count."""
    if os.path.getsize(path) == 0:
        raise InputError(f"{path}: empty file, expected a {kind} log")
    try:
        meta = pq.read_metadata(path)
        schema = meta.schema.to_arrow_schema()
    except PermissionError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"{path}: not a Parquet file ({str(exc).splitlines()[0]})") from None
    kv = {k.decode(errors="replace"): v.decode(errors="replace")
          for k, v in (meta.metadata or {}).items() if k.startswith(_META_PREFIX.encode())}
    found = kv.get(S.META_KIND, "")
    if not found:
        raise InputError(f"{path}: not a callid log (no '{S.META_KIND}' metadata)")
    if found != kind:
        raise InputError(f"{path}: is a {found} log, expected a {kind} log")
    for expected in S.SCHEMAS[kind]:
        idx = schema.get_field_index(expected.name)
        if idx < 0:
            raise InputError(f"{path}: missing column '{expected.name}'")
        got = schema.field(idx).type
        if _normal(got) != _normal(expected.type):
            raise InputError(f"{path}: column '{expected.name}' has type {got}, expected {expected.type}")
    check_layout(kv.get(S.META_LAYOUT, ""), path)
    return kv, meta.num_rows


def validate_log(path_or_glob: str, kind: str) -> LogInfo:
    """Validate every file of a log of ``kind`` ('client' or 'server'); raise :class:`InputError`."""
    files = resolve(path_or_glob)
    rows = 0
    first: dict[str, str] = {}
    for path in files:
        kv, n = _check_file(path, kind)
        rows += n
        if path == files[0]:
            first = kv
            continue
        for key in (S.META_LAYOUT, S.META_RUN_ID):
            if kv.get(key) != first.get(key):
                raise InputError(f"{path}: '{key}' is {kv.get(key)!r} but {first.get(key)!r} in {files[0]}")
    return LogInfo(kind, files, first[S.META_LAYOUT], first.get(S.META_RUN_ID, ""),
                   first.get(S.META_CONFIG, ""), rows,
                   {k.removeprefix(_META_PREFIX): v for k, v in first.items()})
