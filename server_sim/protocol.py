"""Request/response messages and their lebf (little-endian bytefield) encoding, defined once.

lebf as in PVFS2: little-endian fixed-width fields; an 8-byte value is aligned
to 8 by skipping 4 bytes when needed; a string is a u32 length, the bytes and a
NUL, padded to a multiple of 8.  Every message starts with a header (magic,
protocol version, op, flags; responses add status and the server's receive and
send times) followed by the typed hint list and the op's body.

Each message is a dataclass whose fields name their codec: that one list
generates both directions.  Bump ``PROTOCOL_VERSION`` whenever a field list,
an op number or a hint type changes.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import operator
import struct
from dataclasses import dataclass, field
from typing import Any, ClassVar

PROTOCOL_MAGIC = 0x43414C4C  # "CALL"
PROTOCOL_VERSION = 1
#: Most data bytes a small-I/O request carries: the 16 KiB unexpected-message limit
#: less 1 KiB kept for the header, hints and fields.
SMALL_IO_MAX_DATA = 15 * 1024
#: Most file regions one I/O request carries (list I/O, as ROMIO's PVFS2 driver sends them);
#: an access with more regions takes several requests with the same CallIDs.
MAX_IO_REGIONS = 64


class ProtocolError(ValueError):
    """A message that cannot be decoded or breaks a protocol rule."""


class Status(enum.IntEnum):
    """Response status codes (errno-like, as PVFS2 returns them)."""

    OK = 0
    ENOENT = 2
    EIO = 5
    EBADF = 9
    EEXIST = 17
    EINVAL = 22
    ENOSPC = 28
    EMSGSIZE = 90
    EPROTO = 71
    ENOSYS = 38


class Op(enum.IntEnum):
    """Request operations; the response of an op uses the same number."""

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
    WRITE_COMPLETION = 12
    SHARED_FP = 13


class IoType(enum.IntEnum):
    READ = 0
    WRITE = 1


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

# --------------------------------------------------------------------------- hints

# Typed key/value hints, as PVFS2's PVFS_hint: each hint is (key, type, value).
HINT_INT, HINT_STR, HINT_U64_LIST = 1, 2, 3
_HINT_CODECS: dict[int, _Codec] = {HINT_INT: I64, HINT_STR: STR, HINT_U64_LIST: ListOf(U64)}
#: The known hints and their types.  ``callid`` lists every CallID the request serves;
#: ``callid_map`` (aggregated requests) says whose data is where: flat triples
#: (logical offset, length, index into ``callid``), at most ``MAX_CALLID_MAP`` of them.
HINT_TYPES = {"callid": HINT_U64_LIST, "callid_map": HINT_U64_LIST, "rank": HINT_INT,
              "request_id": HINT_INT}
MAX_CALLID_MAP = 256


@functools.lru_cache(maxsize=256)
def _hint_prefix(key: str, kind: int, align: int) -> bytes:
    """The encoded key and type of a hint that starts ``align`` bytes past an 8-byte boundary."""
    out = bytearray(align)
    STR.encode(out, key)
    U32.encode(out, kind)
    return bytes(out[align:])


def _encode_hints(out: bytearray, hints: dict[str, Any]) -> None:
    out += _U32.pack(len(hints))
    for key, value in hints.items():
        kind = HINT_TYPES.get(key, HINT_STR if isinstance(value, str) else HINT_INT)
        out += _hint_prefix(key, kind, len(out) % 8)
        _HINT_CODECS[kind].encode(out, value)


@functools.lru_cache(maxsize=256)
def _hint_key(raw: bytes) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise ProtocolError("hint key is not UTF-8") from None


def _decode_hints(data: memoryview, pos: int) -> tuple[dict[str, Any], int]:
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
        codec = _HINT_CODECS.get(kind)
        if codec is None:
            raise ProtocolError(f"hint {key!r} has unknown type {kind}")
        hints[key], pos = codec.decode(data, pos + 4)
    return hints, pos


# --------------------------------------------------------------------------- messages


def wire(codec: _Codec, default: Any = dataclasses.MISSING) -> Any:
    """Declare a message field and its lebf codec (fields are encoded in declaration order)."""
    if isinstance(default, list):
        return field(default_factory=list, metadata={"lebf": codec})
    return field(default=default, metadata={"lebf": codec})


@dataclass
class Message:
    """Base of all messages: hints travel with every request."""

    OP: ClassVar[Op]
    RESPONSE: ClassVar[bool] = False
    hints: dict[str, Any] = field(default_factory=dict, kw_only=True)

    def body_fields(self) -> list[tuple[str, _Codec]]:
        return _FIELDS[type(self)]


@dataclass
class Response(Message):
    """Base of all responses: status and the server's receive/send times."""

    RESPONSE: ClassVar[bool] = True
    status: int = field(default=Status.OK, kw_only=True)
    t_recv: int = field(default=0, kw_only=True)
    t_send: int = field(default=0, kw_only=True)


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
    """One variable-length field (string, bytes, list)."""

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


_REGISTRY: dict[tuple[int, bool], type[Message]] = {}
_FIELDS: dict[type[Message], list[tuple[str, _Codec]]] = {}
_PROGRAMS: dict[type[Message], list[_Run | _Var]] = {}


def message(cls: type[Message]) -> type[Message]:
    """Register a message class: its ``wire`` fields are its body, in order."""
    _FIELDS[cls] = [(f.name, f.metadata["lebf"]) for f in dataclasses.fields(cls) if "lebf" in f.metadata]
    _PROGRAMS[cls] = _compile(_FIELDS[cls])
    _REGISTRY[(int(cls.OP), cls.RESPONSE)] = cls
    return cls


@message
@dataclass
class PingRequest(Message):
    OP = Op.PING


@message
@dataclass
class PingResponse(Response):
    OP = Op.PING
    server: str = wire(STR, "")


@message
@dataclass
class LookupRequest(Message):
    OP = Op.LOOKUP
    path: str = wire(STR, "")


@message
@dataclass
class CreateRequest(Message):
    OP = Op.CREATE
    path: str = wire(STR, "")
    dfile_count: int = wire(U32, 0)  # 0: every I/O server
    strip_size: int = wire(U64, 0)  # 0: the file system's default
    exclusive: int = wire(U32, 0)


@message
@dataclass
class GetattrRequest(Message):
    OP = Op.GETATTR
    path: str = wire(STR, "")


@message
@dataclass
class AttrResponse(Response):
    """Answer to lookup, create and getattr: the file's handle and layout."""

    OP = Op.LOOKUP
    handle: int = wire(U64, 0)
    strip_size: int = wire(U64, 0)
    dfile_handles: list = wire(ListOf(U64), [])
    dfile_servers: list = wire(ListOf(STR), [])


@message
@dataclass
class RemoveRequest(Message):
    OP = Op.REMOVE
    path: str = wire(STR, "")


@message
@dataclass
class IoRequest(Message):
    """Read or write the logical ``regions`` of a file on one datafile (n of c)."""

    OP = Op.IO
    handle: int = wire(U64, 0)
    io_type: int = wire(U32, IoType.READ)
    strip_size: int = wire(U64, 0)
    dfile_nr: int = wire(U32, 0)
    dfile_count: int = wire(U32, 1)
    regions: list = wire(REGIONS, [])


@message
@dataclass
class IoResponse(Response):
    """I/O acknowledgement: the datafile's size and the flow buffer size the server uses."""

    OP = Op.IO
    bstream_size: int = wire(U64, 0)
    buffer_size: int = wire(U64, 0)


@message
@dataclass
class WriteCompletion(Response):
    """Sent after the last buffer of a write flow is on disk."""

    OP = Op.WRITE_COMPLETION
    bytes_written: int = wire(U64, 0)


@message
@dataclass
class SmallIoRequest(IoRequest):
    """I/O whose data travels inside the request (write) or the response (read)."""

    OP = Op.SMALL_IO
    data: bytes = wire(BYTES, b"")


@message
@dataclass
class SmallIoResponse(Response):
    OP = Op.SMALL_IO
    bstream_size: int = wire(U64, 0)
    bytes_done: int = wire(U64, 0)
    data: bytes = wire(BYTES, b"")


@message
@dataclass
class HandleRequest(Message):
    """Requests that name one datafile: getsize, flush, remove_dfile."""

    OP = Op.GETSIZE
    handle: int = wire(U64, 0)


@message
@dataclass
class FlushRequest(HandleRequest):
    OP = Op.FLUSH


@message
@dataclass
class RemoveDfileRequest(HandleRequest):
    OP = Op.REMOVE_DFILE


@message
@dataclass
class TruncateRequest(Message):
    OP = Op.TRUNCATE
    handle: int = wire(U64, 0)
    size: int = wire(U64, 0)


@message
@dataclass
class SizeResponse(Response):
    """Answer to getsize and truncate: the datafile's size."""

    OP = Op.GETSIZE
    size: int = wire(U64, 0)


@message
@dataclass
class SharedFpRequest(Message):
    """Atomically add ``delta`` to (or, with ``assign``, set) a file's shared file pointer."""

    OP = Op.SHARED_FP
    handle: int = wire(U64, 0)
    delta: int = wire(I64, 0)
    assign: int = wire(U32, 0)


@message
@dataclass
class SharedFpResponse(Response):
    """The shared file pointer before the request (in etypes of the view)."""

    OP = Op.SHARED_FP
    previous: int = wire(I64, 0)


@message
@dataclass
class EmptyResponse(Response):
    """Answer that carries only a status (flush, remove, errors)."""

    OP = Op.FLUSH


_HEADER = struct.Struct("<IIII")  # magic, version, op, flags
_FLAG_RESPONSE = 1
#: What every response adds after the header.
_RESPONSE_FIELDS = _Run(["status", "t_recv", "t_send"], [I32, I64, I64])


def encode(msg: Message) -> bytearray:
    """Encode a message (header, hints, body) into a new buffer."""
    out = bytearray(_HEADER.pack(PROTOCOL_MAGIC, PROTOCOL_VERSION, msg.OP, int(msg.RESPONSE)))
    if msg.RESPONSE:
        _RESPONSE_FIELDS.encode(out, msg)
    _encode_hints(out, msg.hints)
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
    magic, version, op, flags = _HEADER.unpack_from(data, 0)
    if magic != PROTOCOL_MAGIC:
        raise ProtocolError(f"bad magic {magic:#x}")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(f"protocol version {version}, expected {PROTOCOL_VERSION}")
    is_response = bool(flags & _FLAG_RESPONSE)
    cls = _REGISTRY.get((op, is_response))
    if cls is None:
        raise ProtocolError(f"unknown {'response' if is_response else 'request'} op {op}")
    pos = _HEADER.size
    kwargs: dict[str, Any] = {}
    if is_response:
        pos = _RESPONSE_FIELDS.decode(data, pos, kwargs)
    kwargs["hints"], pos = _decode_hints(data, pos)
    for step in _PROGRAMS[cls]:
        pos = step.decode(data, pos, kwargs)
    if pos != len(data):
        raise ProtocolError(f"{len(data) - pos} trailing bytes after {cls.__name__}")
    return cls(**kwargs)


def all_messages() -> list[type[Message]]:
    """Every registered message class (for round-trip tests)."""
    return list(_REGISTRY.values())
