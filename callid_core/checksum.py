"""A log's checksum: a CRC-32 of every byte of the Parquet file, kept in its own footer.

Parquet has page checksums, which DuckDB does not verify, and none over its footer (a flipped byte
there can change a statistic, hence what a filter keeps).  So a log written by callid carries the
key-value pair ``callid.crc32`` whose value is the CRC-32 of the whole file computed with that
value's eight bytes read as :data:`PLACEHOLDER`: the file is written with the placeholder, then the
placeholder is replaced in place by the CRC (the same length: nothing else moves).  :func:`verify`
recomputes it; any changed byte, the value's own included, is found.
"""

from __future__ import annotations

import os
import zlib

from callid_core.schema import META_CHECKSUM

__all__ = ["PLACEHOLDER", "seal", "verify"]

#: the value written first (not hexadecimal: never a CRC)
PLACEHOLDER = b"--------"
_KEY = META_CHECKSUM.encode()
#: a Parquet file ends with its footer, the footer's length (4 bytes) and "PAR1"
_TAIL = 8
#: between a key and its value in the footer (Thrift's compact protocol): the value's field header
#: (field 2, a binary) and its length
_BETWEEN = bytes([0x18, len(PLACEHOLDER)])
_CHUNK = 16 << 20


def _value_at(path: str | os.PathLike[str]) -> tuple[int, bytes] | None:
    """The offset and the 8 bytes of the checksum's value in the footer of ``path``, or None when the
    footer holds no checksum."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        if size < _TAIL + 4:
            return None
        f.seek(size - _TAIL)
        n = int.from_bytes(f.read(4), "little")
        start = max(0, size - _TAIL - n)
        f.seek(start)
        footer = f.read(size - _TAIL - start)
    key = footer.rfind(_KEY + _BETWEEN)
    if key < 0 or key + len(_KEY) + len(_BETWEEN) + len(PLACEHOLDER) > len(footer):
        return None
    at = key + len(_KEY) + len(_BETWEEN)
    return start + at, footer[at:at + len(PLACEHOLDER)]


def _crc(path: str | os.PathLike[str], at: int) -> int:
    """The CRC-32 of ``path`` with the 8 bytes at ``at`` read as :data:`PLACEHOLDER`."""
    crc, pos = 0, 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            if pos < at + len(PLACEHOLDER) and at < pos + len(chunk):
                buf = bytearray(chunk)
                lo, hi = max(at, pos) - pos, min(at + len(PLACEHOLDER), pos + len(chunk)) - pos
                buf[lo:hi] = PLACEHOLDER[lo + pos - at:hi + pos - at]
                chunk = bytes(buf)
            crc = zlib.crc32(chunk, crc)
            pos += len(chunk)
    return crc


def seal(path: str | os.PathLike[str]) -> None:
    """Replace the placeholder in the footer of ``path`` (just written) by the file's CRC-32."""
    found = _value_at(path)
    if found is None or found[1] != PLACEHOLDER:
        raise ValueError(f"{path}: no '{META_CHECKSUM}' placeholder in its footer")
    at = found[0]
    value = f"{_crc(path, at):08x}".encode()
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(value)


def verify(path: str | os.PathLike[str]) -> bool | None:
    """Whether ``path`` is as it was written: None when it carries no checksum."""
    found = _value_at(path)
    if found is None:
        return None
    at, value = found
    return value == f"{_crc(path, at):08x}".encode()
