"""Requests, their replies and their lebf (little-endian bytefield) encoding, defined once.

lebf as in PVFS2: little-endian fixed-width fields; an 8-byte value is aligned
to 8 by skipping 4 bytes when needed; a string is a u32 length, the bytes and a
NUL, padded to a multiple of 8.  Every message starts with the header (magic,
protocol version, op, kind) followed by its fields, the typed hint list first.
The op is the request's, in the request and in every message answering it; the
kind says which of those the message is (:class:`Kind`).

Each message is a dataclass whose fields name their codec: that one list
generates both directions.  Each request class names its reply (``REPLY``, and
``COMPLETION`` for the reply that ends a write's flow); any request may be
answered by an :class:`ErrorResponse` instead.  Bump ``PROTOCOL_VERSION``
whenever a field list, an op number, a kind or a hint type changes.

A field (and a hint, :data:`HINT_VALID`) may also say which values a server accepts
(``wire(..., valid=...)``): the log column it is logged as, whose type bounds it, or the
enum of its values; ``server_sim.validate`` checks every decoded request against that.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import operator
import struct
from dataclasses import dataclass, field
from typing import Any, ClassVar

from callid_core.choices import Payload
from callid_core.errors import CallidError

PROTOCOL_MAGIC = 0x43414C4C  # "CALL"
#: 2: replies carry their request's op and a kind, errors have a reply of their own (the only
#: one with a status), the response times follow the hints.
#: 3: aggregated requests say whose bytes each disk operation moves (hint ``callid_bytes``, per flow
#: buffer) instead of the ``callid_map`` of logical ranges.
#: 4: a server's event log is flushed, read and removed by requests (``log_flush``, ``log_read``,
#: ``log_remove``), so a run takes the logs of servers on hosts whose directories it cannot see.
#: 5: an I/O request says what its flow moves (``payload``: the bytes, or their sizes only).
#: 6: datafiles are created explicitly (``create_dfile``, sent by the client for a file the create's
#: reply says it ``created``); an I/O server refuses a request on a handle it never created (ENOENT);
#: a server's event mask (the layers it logs) is set at run time (``event_mask``).
PROTOCOL_VERSION = 6
#: Most data bytes a small-I/O request carries: the 16 KiB unexpected-message limit
#: less 1 KiB kept for the header, hints and fields.
SMALL_IO_MAX_DATA = 15 * 1024
#: Most file regions one I/O request carries (list I/O, as ROMIO's PVFS2 driver sends them);
#: an access with more regions takes several requests with the same CallIDs.
MAX_IO_REGIONS = 64
#: Most bytes of a log part one ``log_read`` reply carries.
LOG_CHUNK = 4 << 20


class ProtocolError(CallidError, ValueError):
    """A message that cannot be decoded or breaks a protocol rule."""


class Status(enum.IntEnum):
    """The status of an :class:`ErrorResponse` (errno-like, as PVFS2 returns them)."""

    ENOENT = 2
    EIO = 5
    E2BIG = 7  # a request beyond what the server's configuration allows (e.g. its flow length)
    EBADF = 9
    EACCES = 13  # a request on a connection that has not proved it holds the file system's secret
    EEXIST = 17
    EINVAL = 22
    EFBIG = 27  # a datafile the disk's file system cannot make that large
    ENOSPC = 28
    EMSGSIZE = 90
    EPROTO = 71
    ENOSYS = 38


def status_name(status: int) -> str:
    """The name of an :class:`ErrorResponse`'s status (``EIO``), or ``status N`` for an unknown one."""
    try:
        return Status(status).name
    except ValueError:
        return f"status {status}"


class Op(enum.IntEnum):
    """Request operations, one request class each; the messages answering a request carry its op."""

    PING = 1
    LOOKUP = 2
    CREATE = 3
    GETATTR = 4
    REMOVE = 5
    IO = 6
    SMALL_IO = 7
    GETSIZE = 8
    TRUNCATE = 9
    FLUSH = 10
    REMOVE_DFILE = 11
    CREATE_DFILE = 12
    SHARED_FP = 13
    LOG_FLUSH = 14
    LOG_READ = 15
    LOG_REMOVE = 16
    EVENT_MASK = 17


class Kind(enum.IntEnum):
    """Which message of its op a message is."""

    REQUEST = 0
    REPLY = 1  # the request's ``REPLY``
    COMPLETION = 2  # the request's ``COMPLETION``: a write's second reply, after its flow
    ERROR = 3  # an ErrorResponse: the request failed


class IoType(enum.IntEnum):
    READ = 0
    WRITE = 1


#: An I/O request's ``payload``: the file system's :class:`~callid_core.choices.Payload`, numbered in
#: its order (FULL 0: the data travels; NONE 1: sizes only, no data in the request, flow or reply).
PayloadCode = enum.IntEnum("PayloadCode", {"FULL": 0, "NONE": 1})  # (fixed: wire values)
assert {c.name for c in PayloadCode} == {m.name for m in Payload}


def payload_code(payload: str) -> enum.IntEnum:
    """The :data:`PayloadCode` of a configuration's payload (``"none"``: NONE); ValueError if none is."""
    return PayloadCode[Payload(payload).name]


# --------------------------------------------------------------------------- codecs


class _Codec:
    """Encode one value at the end of a bytearray / decode one value at a position."""

    def encode(self, out: bytearray, value: Any) -> None:
        raise NotImplementedError

    def decode(self, data: memoryview, pos: int) -> tuple[Any, int]:
        raise NotImplementedError


def _need(data: memoryview, pos: int, n: int) -> None:
    if pos + n > len(data):
        raise ProtocolError(f"message truncated: needs {pos + n} bytes, has {len(data)}")


class _Scalar(_Codec):
    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.st = struct.Struct("<" + fmt)
        self.align = 8 if self.st.size == 8 else 4
        self.width = 1  # values per element (lists of scalars pack in one struct)
        bits = 8 * self.st.size // len(fmt)
        #: the values the codec can carry: ``lo <= value <= hi``
        self.lo, self.hi = ((-(1 << bits - 1), (1 << bits - 1) - 1) if fmt[0].islower()
                            else (0, (1 << bits) - 1))

    def encode(self, out: bytearray, value: Any) -> None:
        if self.align == 8 and len(out) % 8:
            out += b"\0\0\0\0"
        try:
            out += self.st.pack(value)
        except struct.error as exc:
            raise ProtocolError(f"cannot encode {value!r}: {exc}") from None

    def decode(self, data: memoryview, pos: int) -> tuple[Any, int]:
        if self.align == 8 and pos % 8:
            pos += 4
        if pos + self.st.size > len(data):
            _need(data, pos, self.st.size)
        return self.st.unpack_from(data, pos)[0], pos + self.st.size


U32, I32, U64, I64 = _Scalar("I"), _Scalar("i"), _Scalar("Q"), _Scalar("q")


class _Bytes(_Codec):
    """u32 length, the bytes, a NUL, padding to 8."""

    def encode(self, out: bytearray, value: Any) -> None:
        out += _U32.pack(len(value))
        out += value
        out += _ZEROS[: 8 - (len(out) % 8) or 8]

    def decode(self, data: memoryview, pos: int) -> tuple[Any, int]:
        if pos + 4 > len(data):
            _need(data, pos, 4)
        n = _U32.unpack_from(data, pos)[0]
        pos += 4
        if pos + n + 1 > len(data):
            _need(data, pos, n + 1)
        value = data[pos : pos + n]
        pos += n + 1
        return value, pos + (-pos % 8)


class _Str(_Bytes):
    def encode(self, out: bytearray, value: Any) -> None:
        super().encode(out, value.encode())

    def decode(self, data: memoryview, pos: int) -> tuple[Any, int]:
        raw, pos = super().decode(data, pos)
        try:
            return bytes(raw).decode(), pos
        except UnicodeDecodeError:
            raise ProtocolError("string field is not UTF-8") from None


BYTES, STR = _Bytes(), _Str()
MAX_LIST = 1 << 20
_U32, _I64 = U32.st, I64.st
_ZEROS = bytes(8)


class PairOf(_Scalar):
    """Two u64 values, e.g. an (offset, length) region."""

    def __init__(self) -> None:
        super().__init__("QQ")
        self.align, self.width = 8, 2

    def encode(self, out: bytearray, value: Any) -> None:
        if len(out) % 8:
            out += b"\0\0\0\0"
        try:
            out += self.st.pack(*value)
        except struct.error as exc:
            raise ProtocolError(f"cannot encode {value!r}: {exc}") from None

    def decode(self, data: memoryview, pos: int) -> tuple[Any, int]:
        if pos % 8:
            pos += 4
        if pos + 16 > len(data):
            _need(data, pos, 16)
        return self.st.unpack_from(data, pos), pos + 16


@functools.lru_cache(maxsize=1024)
def _packer(n: int, fmt: str) -> struct.Struct:
    return struct.Struct(f"<{n}{fmt}")


class ListOf(_Codec):
    """u32 count followed by the elements (elements of fixed width: one struct for all)."""

    def __init__(self, elem: _Codec) -> None:
        self.elem = elem

    def encode(self, out: bytearray, value: Any) -> None:
        out += _U32.pack(len(value))
        elem = self.elem
        if not isinstance(elem, _Scalar):
            for item in value:
                elem.encode(out, item)
            return
        if not value:
            return
        if elem.align == 8 and len(out) % 8:
            out += b"\0\0\0\0"
        flat = value if elem.width == 1 else [v for item in value for v in item]
        try:
            out += _packer(len(flat), elem.fmt[0]).pack(*flat)
        except struct.error as exc:
            raise ProtocolError(f"cannot encode {value!r}: {exc}") from None

    def decode(self, data: memoryview, pos: int) -> tuple[Any, int]:
        if pos + 4 > len(data):
            _need(data, pos, 4)
        n = _U32.unpack_from(data, pos)[0]
        pos += 4
        if n > MAX_LIST or n > len(data) - pos:
            raise ProtocolError(f"list of {n} elements does not fit the message")
        elem = self.elem
        if not isinstance(elem, _Scalar):
            items = []
            for _ in range(n):
                item, pos = elem.decode(data, pos)
                items.append(item)
            return items, pos
        if not n:
            return [], pos
        if elem.align == 8 and pos % 8:
            pos += 4
        size = n * elem.st.size
        if pos + size > len(data):
            _need(data, pos, size)
        flat = _packer(n * elem.width, elem.fmt[0]).unpack_from(data, pos)
        items = list(flat) if elem.width == 1 else list(zip(flat[0::2], flat[1::2]))
        return items, pos + size


REGIONS = ListOf(PairOf())


def value_range(codec: _Codec) -> tuple[int, int] | None:
    """``(lo, hi)``: the integers a scalar codec carries (a list of scalars': each element's);
    None for any other codec."""
    elem = codec.elem if isinstance(codec, ListOf) else codec
    return (elem.lo, elem.hi) if type(elem) is _Scalar else None

# --------------------------------------------------------------------------- hints

# Typed key/value hints, as PVFS2's PVFS_hint: each hint is (key, type, value).
HINT_INT, HINT_STR, HINT_U64_LIST = 1, 2, 3
HINT_CODECS: dict[int, _Codec] = {HINT_INT: I64, HINT_STR: STR, HINT_U64_LIST: ListOf(U64)}
#: The known hints and their types.  ``callid`` lists every CallID the request serves;
#: ``callid_bytes`` (requests serving several CallIDs) says whose bytes each of the request's
#: Trove operations moves: see :func:`encode_callid_bytes`.
HINT_TYPES = {"callid": HINT_U64_LIST, "callid_bytes": HINT_U64_LIST, "rank": HINT_INT,
              "request_id": HINT_INT}
#: The log column each hint a server logs becomes: its type bounds the hint's values (as the
#: ``valid`` of :func:`wire` does for a field).
HINT_VALID = {"callid": "callids", "rank": "rank", "request_id": "req_id"}
#: An entry of :data:`callid_bytes`: (index into the ``callid`` list, bytes of that call).
Owned = tuple[tuple[int, int], ...]


def encode_callid_bytes(buffers: list[Owned]) -> list[int]:
    """The ``callid_bytes`` hint: per Trove operation of the request, in order (one per flow
    buffer; the one operation of a small I/O), how many calls own bytes of it, then per call
    its index into ``callid`` and its bytes in the operation.  A flat u64 list:
    ``[c, i1, n1, ..., ic, nc, c', ...]``.  Its size depends on the operations and the calls
    in each, never on how many file ranges the calls own."""
    out: list[int] = []
    for entries in buffers:
        out.append(len(entries))
        for idx, n in entries:
            out += (idx, n)
    return out


def decode_callid_bytes(values: list[int], ncallids: int) -> list[Owned]:
    """The operations' entries of a ``callid_bytes`` hint; :class:`ProtocolError` if it is
    malformed (a count running past the end, an index not below ``ncallids``)."""
    out: list[Owned] = []
    pos, end = 0, len(values)
    while pos < end:
        c = values[pos]
        stop = pos + 1 + 2 * c
        if stop > end:
            raise ProtocolError(f"callid_bytes: {c} entries at {pos} run past the hint's {end} values")
        entries = tuple(zip(values[pos + 1:stop:2], values[pos + 2:stop:2]))
        if any(idx >= ncallids for idx, _ in entries):
            raise ProtocolError(f"callid_bytes: an index is not below the request's {ncallids} CallIDs")
        out.append(entries)
        pos = stop
    return out


@functools.lru_cache(maxsize=256)
def _hint_prefix(key: str, kind: int, align: int) -> bytes:
    """The encoded key and type of a hint that starts ``align`` bytes past an 8-byte boundary."""
    out = bytearray(align)
    STR.encode(out, key)
    U32.encode(out, kind)
    return bytes(out[align:])


@functools.lru_cache(maxsize=256)
def _hint_key(raw: bytes) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise ProtocolError("hint key is not UTF-8") from None


class _Hints(_Codec):
    """The typed hint list: a u32 count, then per hint its key, its type and its value."""

    def encode(self, out: bytearray, value: Any) -> None:
        out += _U32.pack(len(value))
        for key, item in value.items():
            kind = HINT_TYPES.get(key, HINT_STR if isinstance(item, str) else HINT_INT)
            out += _hint_prefix(key, kind, len(out) % 8)
            HINT_CODECS[kind].encode(out, item)

    def decode(self, data: memoryview, pos: int) -> tuple[Any, int]:
        end = len(data)
        if pos + 4 > end:
            _need(data, pos, 4)
        n = _U32.unpack_from(data, pos)[0]
        pos += 4
        if n > 64:
            raise ProtocolError(f"{n} hints is more than the 64 allowed")
        hints: dict[str, Any] = {}
        for _ in range(n):
            if pos + 4 > end:
                _need(data, pos, 4)
            start = pos + 4
            stop = start + _U32.unpack_from(data, pos)[0]
            pos = stop + 1
            pos += -pos % 8
            if pos + 4 > end:  # the key, its NUL and padding, and the type
                _need(data, pos, 4)
            key = _hint_key(bytes(data[start:stop]))
            kind = _U32.unpack_from(data, pos)[0]
            if kind != HINT_TYPES.get(key, kind):
                raise ProtocolError(f"hint {key!r} has type {kind}, not {HINT_TYPES[key]}")
            if kind == HINT_INT and pos + 16 <= end:  # (the usual case, inline: 4 padding bytes, an i64)
                hints[key] = _I64.unpack_from(data, pos + 8)[0]
                pos += 16
                continue
            codec = HINT_CODECS.get(kind)
            if codec is None:
                raise ProtocolError(f"hint {key!r} has unknown type {kind}")
            hints[key], pos = codec.decode(data, pos + 4)
        return hints, pos


HINTS = _Hints()


# --------------------------------------------------------------------------- messages


#: What a field's ``valid`` may name: the server log column its value is logged as (the column's
#: type bounds the value; for a list of regions, each region's offset and end), or the enum of its
#: values.
Valid = str | type[enum.IntEnum] | None


def wire(codec: _Codec, default: Any = dataclasses.MISSING, kw_only: bool = False,
         valid: Valid = None) -> Any:
    """Declare a message field and its lebf codec (fields are encoded in declaration order), and
    which values a server accepts in it (``valid``, see :data:`Valid`; None: any it can decode)."""
    meta = {"lebf": codec, "valid": valid}
    if isinstance(default, (list, dict)):
        return field(default_factory=type(default), metadata=meta, kw_only=kw_only)
    return field(default=default, metadata=meta, kw_only=kw_only)


@dataclass
class Message:
    """Base of all messages: hints travel first in every message."""

    KIND: ClassVar[Kind]
    hints: dict[str, Any] = wire(HINTS, {}, kw_only=True)


@dataclass
class Response(Message):
    """Base of every message answering a request: the request's op (carried in the header)
    and the server's receive and send times."""

    KIND: ClassVar[Kind] = Kind.REPLY
    op: int = field(default=0, kw_only=True)
    t_recv: int = wire(I64, 0, kw_only=True)
    t_send: int = wire(I64, 0, kw_only=True)


@dataclass
class Request(Message):
    """Base of all requests: the op, its name and the classes of the messages answering it."""

    KIND: ClassVar[Kind] = Kind.REQUEST
    OP: ClassVar[Op]
    NAME: ClassVar[str]  # the op's name in lower case (set when the class is registered)
    REPLY: ClassVar[type[Response]]
    COMPLETION: ClassVar[type[Response] | None] = None

    @property
    def op(self) -> int:
        """The op (as every message has one: a reply's is its request's)."""
        return self.OP

    def reply(self, **fields: Any) -> Response:
        """This request's reply."""
        return self.REPLY(op=self.OP, **fields)

    def completion(self, **fields: Any) -> Response:
        """This request's completion (the reply after its flow)."""
        return self.COMPLETION(op=self.OP, **fields)

    def error(self, status: Status) -> ErrorResponse:
        """The answer saying this request failed with ``status``."""
        return ErrorResponse(status, op=self.OP)


class _Run:
    """Consecutive scalar fields of a message, compiled into one struct per start alignment.

    Every field is 4 or 8 bytes and every variable field ends 4- or 8-aligned, so a run
    starts at 0 or 4 modulo 8; its 4-byte skips are placed accordingly."""

    def __init__(self, names: list[str], scalars: list[_Scalar]) -> None:
        self.names = names
        self.get = operator.attrgetter(*names)
        self.structs = [self._struct(scalars, 0), None, None, None, self._struct(scalars, 4)]

    @staticmethod
    def _struct(scalars: list[_Scalar], pos: int) -> struct.Struct:
        fmt = "<"
        for sc in scalars:
            if sc.align == 8 and pos % 8:
                fmt, pos = fmt + "4x", pos + 4
            fmt, pos = fmt + sc.fmt, pos + sc.st.size
        return struct.Struct(fmt)

    def encode(self, out: bytearray, msg: Message) -> None:
        values = self.get(msg)
        try:
            out += self.structs[len(out) % 8].pack(*values) if len(self.names) > 1 else \
                self.structs[len(out) % 8].pack(values)
        except struct.error as exc:
            raise ProtocolError(f"cannot encode {values!r}: {exc}") from None

    def decode(self, data: memoryview, pos: int, into: dict[str, Any]) -> int:
        st = self.structs[pos % 8]
        if pos + st.size > len(data):
            _need(data, pos, st.size)
        into.update(zip(self.names, st.unpack_from(data, pos)))
        return pos + st.size


class _Var:
    """One variable-length field (string, bytes, list, hints)."""

    def __init__(self, name: str, codec: _Codec) -> None:
        self.name, self.codec = name, codec

    def encode(self, out: bytearray, msg: Message) -> None:
        self.codec.encode(out, getattr(msg, self.name))

    def decode(self, data: memoryview, pos: int, into: dict[str, Any]) -> int:
        into[self.name], pos = self.codec.decode(data, pos)
        return pos


def _compile(fields: list[tuple[str, _Codec]]) -> list[_Run | _Var]:
    """The encoding program of a field list: runs of scalars, and variable fields."""
    program: list[_Run | _Var] = []
    run: list[tuple[str, _Codec]] = []
    for name, codec in [*fields, ("", None)]:
        if type(codec) is _Scalar:
            run.append((name, codec))
            continue
        if run:
            program.append(_Run([n for n, _ in run], [c for _, c in run]))
            run = []
        if codec is not None:
            program.append(_Var(name, codec))
    return program


_FIELDS: dict[type[Message], list[tuple[str, _Codec]]] = {}
_VALID: dict[type[Message], list[tuple[str, _Codec, Valid]]] = {}
_PROGRAMS: dict[type[Message], list[_Run | _Var]] = {}
_CLASSES: dict[tuple[int, int], type[Message]] = {}  # (op, kind) -> the class to decode
#: Every request class, by its op.
REQUESTS: dict[Op, type[Request]] = {}


def message(cls: type[Message]) -> type[Message]:
    """Register a message class: its ``wire`` fields, in order, are what follows the header.

    A request registers the classes answering it: its ``REPLY``, its ``COMPLETION`` and
    :class:`ErrorResponse`, each under the request's op."""
    _FIELDS[cls] = [(f.name, f.metadata["lebf"]) for f in dataclasses.fields(cls) if "lebf" in f.metadata]
    _VALID[cls] = [(f.name, f.metadata["lebf"], f.metadata["valid"]) for f in dataclasses.fields(cls)
                   if f.metadata.get("valid") is not None]
    _PROGRAMS[cls] = _compile(_FIELDS[cls])
    if issubclass(cls, Request):
        if cls.OP in REQUESTS:
            raise TypeError(f"two request classes for {cls.OP!r}")
        cls.NAME = cls.OP.name.lower()
        REQUESTS[cls.OP] = cls
        for kind, answer in ((Kind.REQUEST, cls), (Kind.REPLY, cls.REPLY),
                             (Kind.COMPLETION, cls.COMPLETION), (Kind.ERROR, ErrorResponse)):
            if answer is not None:
                _CLASSES[(cls.OP, kind)] = answer
    return cls


def wire_fields(cls: type[Message]) -> list[tuple[str, _Codec]]:
    """A message class's wire fields (name, codec), in wire order."""
    return _FIELDS[cls]


def valid_fields(cls: type[Message]) -> list[tuple[str, _Codec, Valid]]:
    """A message class's fields that say which values a server accepts: (name, codec, valid)."""
    return _VALID[cls]


# -- replies


@message
@dataclass
class ErrorResponse(Response):
    """The answer to a request that failed (op 0: to a request that could not be read)."""

    KIND = Kind.ERROR
    status: int = wire(I32)


_CLASSES[(0, Kind.ERROR)] = ErrorResponse


@message
@dataclass
class PingResponse(Response):
    server: str = wire(STR, "")


@message
@dataclass
class AttrResponse(Response):
    """Answer to lookup, getattr, create (the file's handle and layout) and remove (its datafiles)."""

    handle: int = wire(U64, 0)
    strip_size: int = wire(U64, 0)
    dfile_handles: list = wire(ListOf(U64), [])
    dfile_servers: list = wire(ListOf(STR), [])
    created: int = wire(U32, 0)  # (create) 1: this request made the file, whose datafiles the client creates


@message
@dataclass
class IoResponse(Response):
    """I/O acknowledgement: the datafile's size and the flow buffer size the server uses."""

    bstream_size: int = wire(U64, 0)
    buffer_size: int = wire(U64, 0)


@message
@dataclass
class WriteCompletion(Response):
    """Sent after the last buffer of a write flow is on disk."""

    KIND = Kind.COMPLETION
    bytes_written: int = wire(U64, 0)


@message
@dataclass
class SmallIoResponse(Response):
    bstream_size: int = wire(U64, 0)
    bytes_done: int = wire(U64, 0)
    data: bytes = wire(BYTES, b"")


@message
@dataclass
class SizeResponse(Response):
    """Answer to getsize and truncate: the datafile's size."""

    size: int = wire(U64, 0)


@message
@dataclass
class SharedFpResponse(Response):
    """The shared file pointer before the request (in etypes of the view)."""

    previous: int = wire(I64, 0)


@message
@dataclass
class EmptyResponse(Response):
    """Answer that says only that the request was done (flush, remove_dfile, log_remove)."""


@message
@dataclass
class LogPartsResponse(Response):
    """The part files of the server's event log, and their sizes in bytes."""

    names: list = wire(ListOf(STR), [])
    sizes: list = wire(ListOf(U64), [])


@message
@dataclass
class LogDataResponse(Response):
    """Bytes of a log part from the request's offset: at most :data:`LOG_CHUNK`, none at its end."""

    data: bytes = wire(BYTES, b"")


# -- requests


@message
@dataclass
class PingRequest(Request):
    OP = Op.PING
    REPLY = PingResponse


@message
@dataclass
class LookupRequest(Request):
    OP = Op.LOOKUP
    REPLY = AttrResponse
    path: str = wire(STR, "")


@message
@dataclass
class CreateRequest(Request):
    OP = Op.CREATE
    REPLY = AttrResponse
    path: str = wire(STR, "")
    dfile_count: int = wire(U32, 0)  # 0: every I/O server
    strip_size: int = wire(U64, 0, valid="size")  # 0: the file system's default
    exclusive: int = wire(U32, 0)


@message
@dataclass
class GetattrRequest(Request):
    OP = Op.GETATTR
    REPLY = AttrResponse
    path: str = wire(STR, "")


@message
@dataclass
class RemoveRequest(Request):
    OP = Op.REMOVE
    REPLY = AttrResponse
    path: str = wire(STR, "")


@message
@dataclass
class IoRequest(Request):
    """Read or write the logical ``regions`` of a file on one datafile (n of c).

    The reply acknowledges the request; the data follows in flow buffers (with payload NONE no
    buffer travels), and a write ends with its completion."""

    OP = Op.IO
    REPLY = IoResponse
    COMPLETION = WriteCompletion
    handle: int = wire(U64, 0, valid="handle")
    io_type: int = wire(U32, IoType.READ, valid=IoType)
    strip_size: int = wire(U64, 0, valid="size")
    dfile_nr: int = wire(U32, 0)
    dfile_count: int = wire(U32, 1)
    regions: list = wire(REGIONS, [], valid="file_end")
    # the file system's payload (Config.payload); a server serving another one refuses the request
    payload: int = wire(U32, PayloadCode.FULL, valid=PayloadCode)


@message
@dataclass
class SmallIoRequest(IoRequest):
    """I/O whose data travels inside the request (write) or the reply (read); with payload NONE,
    neither carries any."""

    OP = Op.SMALL_IO
    REPLY = SmallIoResponse
    COMPLETION = None
    data: bytes = wire(BYTES, b"")


@message
@dataclass
class GetsizeRequest(Request):
    OP = Op.GETSIZE
    REPLY = SizeResponse
    handle: int = wire(U64, 0, valid="handle")


@message
@dataclass
class TruncateRequest(Request):
    OP = Op.TRUNCATE
    REPLY = SizeResponse
    handle: int = wire(U64, 0, valid="handle")
    size: int = wire(U64, 0, valid="offset")  # (logged as its Trove operation's offset)


@message
@dataclass
class FlushRequest(Request):
    OP = Op.FLUSH
    REPLY = EmptyResponse
    handle: int = wire(U64, 0, valid="handle")


@message
@dataclass
class CreateDfileRequest(Request):
    """Create a datafile of a new file (its handle picked by the metadata server), as PVFS2's client
    creates a new file's datafiles on the I/O servers."""

    OP = Op.CREATE_DFILE
    REPLY = EmptyResponse
    handle: int = wire(U64, 0, valid="handle")


@message
@dataclass
class RemoveDfileRequest(Request):
    OP = Op.REMOVE_DFILE
    REPLY = EmptyResponse
    handle: int = wire(U64, 0, valid="handle")


@message
@dataclass
class SharedFpRequest(Request):
    """Atomically add ``delta`` to (or, with ``assign``, set) a file's shared file pointer."""

    OP = Op.SHARED_FP
    REPLY = SharedFpResponse
    handle: int = wire(U64, 0, valid="handle")
    delta: int = wire(I64, 0)
    assign: int = wire(U32, 0)


@message
@dataclass
class LogFlushRequest(Request):
    """Write the events logged so far as a part file; say which parts the log has."""

    OP = Op.LOG_FLUSH
    REPLY = LogPartsResponse


@message
@dataclass
class LogReadRequest(Request):
    """Read a part of the event log (named as :class:`LogPartsResponse` names it) from ``offset``."""

    OP = Op.LOG_READ
    REPLY = LogDataResponse
    name: str = wire(STR, "")
    offset: int = wire(U64, 0)


@message
@dataclass
class LogRemoveRequest(Request):
    """Remove a part of the event log (once whoever asked has it)."""

    OP = Op.LOG_REMOVE
    REPLY = EmptyResponse
    name: str = wire(STR, "")


@message
@dataclass
class EventMaskResponse(Response):
    """The layers a server logs (from now on)."""

    layers: list = wire(ListOf(STR), [])


@message
@dataclass
class EventMaskRequest(Request):
    """Set the layers the server logs (names of ``callid_core.schema.SERVER_LAYERS``), as the thesis'
    event mask does; ``query`` 1: only say them."""

    OP = Op.EVENT_MASK
    REPLY = EventMaskResponse
    layers: list = wire(ListOf(STR), [])
    query: int = wire(U32, 0)


# -- encoding

_HEADER = struct.Struct("<IIII")  # magic, version, op, kind


def encode(msg: Message) -> bytearray:
    """Encode a message (header, then its fields) into a new buffer."""
    out = bytearray(_HEADER.pack(PROTOCOL_MAGIC, PROTOCOL_VERSION, msg.op, msg.KIND))
    for step in _PROGRAMS[type(msg)]:
        step.encode(out, msg)
    return out


def decode(data: bytes | bytearray | memoryview) -> Message:
    """Decode one message; raise :class:`ProtocolError` on anything malformed."""
    data = memoryview(data)
    if data.format != "B" or data.ndim != 1:
        data = data.cast("B")
    if len(data) < _HEADER.size:
        raise ProtocolError(f"message of {len(data)} bytes is shorter than its header")
    magic, version, op, kind = _HEADER.unpack_from(data, 0)
    if magic != PROTOCOL_MAGIC:
        raise ProtocolError(f"bad magic {magic:#x}")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(f"protocol version {version}, expected {PROTOCOL_VERSION}")
    cls = _CLASSES.get((op, kind))
    if cls is None:
        raise ProtocolError(f"no message of op {op} and kind {kind}")
    pos = _HEADER.size
    kwargs: dict[str, Any] = {}
    for step in _PROGRAMS[cls]:
        pos = step.decode(data, pos, kwargs)
    if pos != len(data):
        raise ProtocolError(f"{len(data) - pos} trailing bytes after {cls.__name__}")
    if kind != Kind.REQUEST:
        kwargs["op"] = op
    return cls(**kwargs)


def decode_reply(data: bytes | bytearray | memoryview, request: Request,
                 expect: type[Response] | None = None) -> Response:
    """Decode the answer to ``request``: its ``expect`` (default: its ``REPLY``) or an
    :class:`ErrorResponse`; anything else is a :class:`ProtocolError`."""
    msg = decode(data)
    cls = type(msg)
    if cls is (expect or request.REPLY) and msg.op == request.OP:
        return msg
    if cls is ErrorResponse and msg.op in (request.OP, 0):
        return msg
    raise ProtocolError(f"{cls.__name__} of op {msg.op} does not answer a {request.NAME} request")

