"""What a server accepts: every decoded request and every log row checked in one place.

The ranges come from two declarations, never restated here: the protocol says which log
column each request field and hint becomes (``valid`` of ``protocol.wire``,
``protocol.HINT_VALID``), and the log schema (``callid_core.schema.SERVER``) gives each
column's Arrow type, hence its range.  Beyond ranges, a path must name a file and a strip size be
one the file system can use, as the command line checks them (``_MEANING``).  A request is checked
once, before its state machine runs (:func:`check_request`); a row is checked when it is appended
to the log (:func:`row_check`), so a value that slipped through can fail its own request but never
the batch of rows it would have joined.  A check skips what a field's codec already guarantees (an
u64 handle always fits a uint64 column).
"""

from __future__ import annotations

import enum
import functools
import operator
import struct
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from callid_core import schema as S
from callid_core.choices import SERVER_LAYERS
from callid_core.config import MAX_STRIP_SIZE, MIN_STRIP_SIZE
from callid_core.errors import CallidError
from callid_core.filenames import canonical
from server_sim import protocol as P

__all__ = ["Invalid", "check_request", "int_range", "row_check"]


class Invalid(CallidError, ValueError):
    """A value its declaration does not allow (a request field, a hint, a log row's column)."""


def int_range(type_: pa.DataType) -> tuple[int, int]:
    """``(lo, hi)``: the values of an Arrow integer type (of its elements, for a list type)."""
    if pa.types.is_list(type_):
        type_ = type_.value_type
    if not pa.types.is_integer(type_):
        raise TypeError(f"{type_} is not an integer type")
    bits = type_.bit_width
    if pa.types.is_signed_integer(type_):
        return -(1 << bits - 1), (1 << bits - 1) - 1
    return 0, (1 << bits) - 1


def _column(name: str) -> tuple[int, int]:
    return int_range(next(c.type for c in S.SERVER.columns if c.name == name))


Check = Callable[[Any], str | None]  # the value -> None, or what is wrong with it


def _value_check(codec: Any, valid: P.Valid) -> Check | None:
    """The check of one field's value (None: its codec already guarantees it)."""
    if isinstance(valid, type) and issubclass(valid, enum.IntEnum):
        allowed = frozenset(valid)
        names = ", ".join(f"{m.value} ({m.name})" for m in valid)
        return lambda v: None if v in allowed else f"{v} is not one of {names}"
    lo, hi = _column(valid)
    if codec is P.REGIONS:  # (offset, length) pairs: the offset and the end must fit
        def regions(v: list[tuple[int, int]]) -> str | None:
            for off, n in v:
                if not (lo <= off and off + n <= hi):
                    return f"region ({off}, {n}) ends beyond {hi} ({valid} is {_type_name(valid)})"
            return None
        return regions
    carried = P.value_range(codec)
    if carried is None:
        raise TypeError(f"a {type(codec).__name__} field cannot be bounded by column {valid!r}")
    if lo <= carried[0] and carried[1] <= hi:
        return None
    outside = f"outside [{lo}, {hi}] ({valid} is {_type_name(valid)})"
    if isinstance(codec, P.ListOf):
        return lambda v: None if not v or (lo <= min(v) and max(v) <= hi) else f"a value of {v} is {outside}"
    return lambda v: None if lo <= v <= hi else f"{v} is {outside}"


def _type_name(column: str) -> str:
    return str(next(c.type for c in S.SERVER.columns if c.name == column))


@functools.cache
def _checks(cls: type[P.Message]) -> tuple[tuple[str, Check], ...]:
    """The checks of a request class's fields, compiled once."""
    found = ((name, _value_check(codec, valid)) for name, codec, valid in P.valid_fields(cls))
    return tuple((name, check) for name, check in found if check is not None)


#: The checks of the hints a server logs, by key.
_HINT_CHECKS: dict[str, Check] = {
    key: check for key, column in P.HINT_VALID.items()
    if (check := _value_check(P.HINT_CODECS[P.HINT_TYPES[key]], column)) is not None
}


#: the longest path and name a server accepts (Linux's PATH_MAX and NAME_MAX, in bytes)
PATH_MAX, NAME_MAX = 4096, 255


def _path(v: str) -> str | None:
    """A file's path as clients send it: absolute, in its one spelling (``callid_core.filenames``), a
    name."""
    if "\0" in v or not v.startswith("/") or v != canonical(v) or v == "/":
        return f"{v[:80]!r} is not an absolute, normalized path of a file"
    if len(v.encode()) > PATH_MAX or any(len(c.encode()) > NAME_MAX for c in v.split("/")):
        return f"a path of {len(v.encode())} bytes is longer than {PATH_MAX} or has a name over {NAME_MAX}"
    return None


def _strip(v: int, default_allowed: bool) -> str | None:
    if (v == 0 and default_allowed) or MIN_STRIP_SIZE <= v <= MAX_STRIP_SIZE:
        return None
    zero = " or 0" if default_allowed else ""
    return f"{v} is not a strip size in [{MIN_STRIP_SIZE}, {MAX_STRIP_SIZE}]{zero}"


def _layers(v: list) -> str | None:
    if len(v) > len(SERVER_LAYERS) or len(set(v)) != len(v) or not set(v) <= set(SERVER_LAYERS):
        return f"{str(v)[:80]} is not a list of distinct layers of {', '.join(SERVER_LAYERS)}"
    return None


#: What a field means beyond its range (as the command line checks the same value), by request class
#: and field: a path names a file, a strip size is one the file system can use (0 at a create: the default).
_MEANING: dict[type[P.Message], tuple[tuple[str, Check], ...]] = {
    **{cls: (("path", _path),) for cls in (P.LookupRequest, P.GetattrRequest, P.RemoveRequest)},
    P.CreateRequest: (("path", _path), ("strip_size", lambda v: _strip(v, True))),
    P.EventMaskRequest: (("layers", _layers),),
    **{cls: (("strip_size", lambda v: _strip(v, False)),) for cls in (P.IoRequest, P.SmallIoRequest)},
}


def check_request(req: P.Message) -> None:
    """Raise :class:`Invalid` naming the first field or hint of ``req`` its declaration does not allow."""
    for name, check in (*_checks(type(req)), *_MEANING.get(type(req), ())):
        wrong = check(getattr(req, name))
        if wrong is not None:
            raise Invalid(f"{type(req).__name__}.{name}: {wrong}")
    hints = req.hints
    for key, check in _HINT_CHECKS.items():
        if key in hints:
            wrong = check(hints[key])
            if wrong is not None:
                raise Invalid(f"hint {key}: {wrong}")


# --------------------------------------------------------------------------- log rows

_FORMATS = {pa.int32(): "i", pa.int64(): "q", pa.uint64(): "Q"}


@functools.lru_cache(maxsize=64)
def _packer(n: int, fmt: str) -> struct.Struct:
    return struct.Struct(f"<{n}{fmt}")


def row_check(table: S.Table) -> Callable[[tuple], None]:
    """The check of a row of ``table`` (a tuple in schema order): it raises :class:`Invalid`
    unless every integer fits its column's type (packing them in one struct checks them all
    at once), every string column holds a string and every list of integers fits its type:
    what the log's flush needs to turn the row into Arrow columns.  For tables whose columns
    are all integers, strings or lists of integers, none nullable (the server log)."""
    cols = table.columns
    ints = [i for i, c in enumerate(cols) if c.type in _FORMATS]
    strings = [i for i, c in enumerate(cols) if pa.types.is_string(c.type)]
    lists = [(i, _FORMATS[c.type.value_type]) for i, c in enumerate(cols)
             if pa.types.is_list(c.type) and c.type.value_type in _FORMATS]
    other = [c.name for c in cols if c.nullable] + [cols[i].name for i in range(len(cols))
                                                    if i not in {*ints, *strings, *dict(lists)}]
    if other:
        raise TypeError(f"{table.name}: no row check for nullable or other columns {sorted(set(other))}")
    packed = struct.Struct("<" + "".join(_FORMATS[cols[i].type] for i in ints))
    get_ints, get_strings = operator.itemgetter(*ints), operator.itemgetter(*strings)

    def check(row: tuple) -> None:
        try:
            packed.pack(*get_ints(row))
            "".join(get_strings(row))
            for i, fmt in lists:
                values = row[i]
                if values:
                    _packer(len(values), fmt).pack(*values)
        except (struct.error, TypeError) as exc:
            raise Invalid(f"{table.name} log row does not fit its schema ({exc}): {row}") from None
    return check
