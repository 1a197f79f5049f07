"""Load step: find a log's files, validate them against ``callid_core.schema`` (footers), then check
the values the merge relies on (one SQL pass per log)."""

from __future__ import annotations

import glob
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from callid_core import checksum
from callid_core import schema as S
from callid_core.errors import InputError
from callid_core.ids import CallIDError, Layout
from pipeline.dialect import DUCKDB, Dialect

_META_PREFIX = "callid."
#: the metadata key saying whether every file of a log carried a checksum, all verified ("yes"), or
#: not ("no": parts of a run, or written by an earlier callid); ``client.checksummed`` in the run table
CHECKED = "checksummed"


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

    def files_sql(self) -> str:
        """SQL: the list of the log's files."""
        return "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in self.files) + "]"

    def scan(self, rows: bool = False) -> str:
        """SQL reading the log's files (``rows``: with each row's ``filename`` and ``file_row_number``)."""
        where = ", filename = true, file_row_number = true" if rows else ""
        return f"read_parquet({self.files_sql()}{where})"


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


def _check_file(path: str, kind: str) -> tuple[dict[str, str], int, bool]:
    """Validate one file's footer and checksum; return its ``callid.*`` metadata, its row count and
    whether it carried a checksum."""
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
            version = kv.get(S.META_SCHEMA_VERSION, "")
            older = (f" (written by an earlier callid: log schema {version}, this one reads "
                     f"{S.SCHEMA_VERSION}; run or replay it again)" if version and version != S.SCHEMA_VERSION
                     else "")
            raise InputError(f"{path}: missing column '{expected.name}'{older}")
        got = schema.field(idx).type
        if _normal(got) != _normal(expected.type):
            raise InputError(f"{path}: column '{expected.name}' has type {got}, expected {expected.type}")
    check_layout(kv.get(S.META_LAYOUT, ""), path)
    verified = checksum.verify(path)
    if verified is False:
        raise InputError(f"{path}: damaged: its bytes do not match the checksum callid wrote in it "
                         "(changed since it was written)")
    return kv, meta.num_rows, bool(verified)


def validate_log(path_or_glob: str, kind: str) -> LogInfo:
    """Validate every file of a log of ``kind`` ('client' or 'server'); raise :class:`InputError`."""
    files = resolve(path_or_glob)
    rows = 0
    first: dict[str, str] = {}
    checked = True
    for path in files:
        kv, n, verified = _check_file(path, kind)
        rows += n
        checked = checked and verified
        if path == files[0]:
            first = kv
            continue
        for key in (S.META_LAYOUT, S.META_RUN_ID):
            if kv.get(key) != first.get(key):
                raise InputError(f"{path}: '{key}' is {kv.get(key)!r} but {first.get(key)!r} in {files[0]}")
    meta = {k: v for k, v in first.items() if k != S.META_CHECKSUM}
    meta[_META_PREFIX + CHECKED] = "yes" if checked else "no"
    return LogInfo(kind, files, first[S.META_LAYOUT], first.get(S.META_RUN_ID, ""),
                   first.get(S.META_CONFIG, ""), rows,
                   {k.removeprefix(_META_PREFIX): v for k, v in meta.items()})


#: of the ids a server gives its events, a span at most this many times their number is checked for
#: repeats with a bitmap (one pass, no hash table)
_BITMAP_SPAN = 64


class Problems(NamedTuple):
    """What :func:`find_problems` counted in a log: the columns holding a null they must not, and the
    rows with a negative size, an end before the start, or a key seen before."""

    nulls: list[str]
    negative: int
    backwards: int
    repeated: int

    @property
    def any(self) -> bool:
        return bool(self.nulls or self.negative or self.backwards or self.repeated)


def find_problems(rows: Callable[[str], list[tuple]], d: Dialect, info: LogInfo, source: str) -> Problems:
    """Count the values the merge cannot take in the log ``info`` read as ``source`` (a scan, or a view
    of an engine writing SQL of dialect ``d``, whose ``rows(sql)`` runs a query): a null in a column
    the schema declares non-nullable, a negative size, an end before its start, a CallID of a call
    twice (client log) or an event id of a server twice (server log)."""
    required = [c.name for c in S.LOGS[info.kind].columns if not c.nullable and not pa.types.is_list(c.type)]
    nulls = rows("SELECT " + ", ".join(f'count(*) - count("{c}")' for c in required)
                 + f", count(*) FROM {source}")[0]
    if info.kind == S.KIND_SERVER:
        distinct = "count(DISTINCT event_id)"
        if d == DUCKDB:  # (a bitmap of the ids, when they are dense: a sixth of the time)
            lo, hi = rows(f"SELECT min(event_id), max(event_id) FROM {source}")[0]
            if hi is not None and hi - lo < _BITMAP_SPAN * nulls[-1]:
                distinct = f"bit_count(bitstring_agg(event_id, {lo}, {hi}))"
        counts = rows(f"""
            SELECT sum(negative), sum(backwards), sum(n - ids) FROM (
                SELECT count(*) FILTER (WHERE size < 0) AS negative,
                       count(*) FILTER (WHERE t_end < t_start) AS backwards, count(*) AS n, {distinct} AS ids
                FROM {source} GROUP BY server) p""")[0]
    else:
        call = _stamped(info, d)
        counts = rows(f"""
            SELECT count(*) FILTER (WHERE error IS NULL AND (size < 0 OR bytes < 0)),
                   count(*) FILTER (WHERE t_end < t_start),
                   count(*) FILTER (WHERE {call}) - count(DISTINCT callid) FILTER (WHERE {call})
            FROM {source}""")[0]
    return Problems([c for c, n in zip(required, nulls) if n], *(int(n or 0) for n in counts))


def check_values(con: duckdb.DuckDBPyConnection, info: LogInfo, found: Problems | None = None) -> None:
    """Check the values the merge relies on (:func:`find_problems`; the nulls from the files'
    statistics), in one pass over the log's files unless ``found`` says what is wrong already.
    :class:`InputError` names the file, the column and the first bad row (counted from 0)."""
    if found is None:
        found = find_problems(lambda sql: con.execute(sql).fetchall(), DUCKDB, info, info.scan())
    for column in found.nulls:
        _first_bad(con, info, f'"{column}" IS NULL', f"column '{column}' is null")
    if info.kind == S.KIND_SERVER:
        sizes = {"size": "size < 0"}
    else:  # (a failed call logs what it was passed)
        sizes = {c: f"{c} < 0 AND error IS NULL" for c in ("size", "bytes")}
    for column, bad in sizes.items() if found.negative else ():
        _first_bad(con, info, bad, f"column '{column}' is negative", column)
    if found.backwards:
        _first_bad(con, info, "t_end < t_start", "column 't_end' is before 't_start'", "t_end", "t_start")
    if found.repeated:
        _first_repeat(con, info)


def _stamped(info: LogInfo, d: Dialect = DUCKDB) -> str:
    """SQL: a client log row of a stamped call."""
    return f"kind = 'call' AND callid <> {d.u64(info.callid_layout.sentinel)}"


def _first_bad(con: duckdb.DuckDBPyConnection, info: LogInfo, bad: str, say: str, *shown: str) -> None:
    """:class:`InputError` naming the first row of the log where ``bad`` holds (if one does), with the
    values of the columns ``shown``."""
    values = "".join(f', "{c}"' for c in shown)
    rows = con.execute(f"""
        SELECT list_position({info.files_sql()}, filename), file_row_number{values}
        FROM {info.scan(rows=True)} WHERE {bad} ORDER BY 1, 2 LIMIT 1""").fetchall()
    if rows:
        f, row, *values = rows[0]
        detail = f" ({' < '.join(map(str, values))})" if values else ""
        raise InputError(f"{info.files[f - 1]}: {say} in row {row}{detail}")


def _first_repeat(con: duckdb.DuckDBPyConnection, info: LogInfo) -> None:
    """:class:`InputError` naming the first row that repeats a CallID of a call (client) or an
    event id of a server (server), and where it was first."""
    server = info.kind == S.KIND_SERVER
    key, where = ("server, event_id", "true") if server else ("callid", _stamped(info))
    found = con.execute(f"""
        SELECT {key}, places[1], places[2] FROM (
            SELECT {key}, list([f, file_row_number] ORDER BY f, file_row_number) AS places
            FROM (SELECT *, list_position({info.files_sql()}, filename) AS f FROM {info.scan(rows=True)})
            WHERE {where} GROUP BY ALL HAVING count(*) > 1)
        ORDER BY places[2] LIMIT 1""").fetchall()
    if found:
        *value, (f1, r1), (f2, r2) = found[0]
        what = (f"event_id {value[1]} of server {value[0]}" if server
                else f"CallID {info.callid_layout.format(value[0])}")
        first = f"row {r1}" + (f" of {info.files[f1 - 1]}" if f1 != f2 else "")
        raise InputError(f"{info.files[f2 - 1]}: column '{key.split(', ')[-1]}' repeats {what} in row {r2} "
                         f"(first in {first})")
