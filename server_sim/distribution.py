"""The simple_stripe distribution: pure offset arithmetic, as PVFS2's dist-simple-stripe.

With strip size ``s`` and ``c`` datafiles, datafile ``n`` holds the logical bytes
``[k*s*c + n*s, k*s*c + (n+1)*s)`` for k = 0, 1, ... at physical offsets
``[k*s, (k+1)*s)``.  A contiguous logical range therefore maps to one
contiguous physical range on each datafile.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from callid_core.config import DEFAULT_STRIP_SIZE


@dataclass(frozen=True)
class SimpleStripe:
    """Round-robin strips of ``strip_size`` bytes over ``dfile_count`` datafiles."""

    strip_size: int = DEFAULT_STRIP_SIZE
    dfile_count: int = 1

    def __post_init__(self) -> None:
        if self.strip_size <= 0 or self.dfile_count <= 0:
            raise ValueError(f"invalid simple_stripe {self.strip_size=} {self.dfile_count=}")

    def dfile_of(self, logical: int) -> int:
        """The datafile holding logical byte ``logical``."""
        return (logical // self.strip_size) % self.dfile_count

    def physical_start(self, dfile: int, logical: int) -> int:
        """Physical offset on ``dfile`` of its first byte at or after ``logical``.

        Also the physical size of ``dfile`` for a file of logical size ``logical``.
        """
        s, c = self.strip_size, self.dfile_count
        strip, within = divmod(logical, s)
        stripe, holder = divmod(strip, c)
        if holder == dfile:
            return stripe * s + within
        return (stripe + (holder > dfile)) * s

    def physical_to_logical(self, dfile: int, physical: int) -> int:
        """Logical offset of the byte at ``physical`` on ``dfile``."""
        stripe, within = divmod(physical, self.strip_size)
        return (stripe * self.dfile_count + dfile) * self.strip_size + within

    def logical_extent(self, dfile: int, pieces: Sequence[tuple[int, int]]) -> tuple[int, int]:
        """``(first, end)``: the logical range from the first to past the last byte of physical
        ``pieces`` on ``dfile`` (it holds other datafiles' strips between them)."""
        lo = min(o for o, _ in pieces)
        hi = max(o + n for o, n in pieces)
        return self.physical_to_logical(dfile, lo), self.physical_to_logical(dfile, hi - 1) + 1

    def logical_size(self, dfile: int, physical_size: int) -> int:
        """Smallest logical file size that makes ``dfile`` ``physical_size`` bytes long."""
        if physical_size <= 0:
            return 0
        return self.physical_to_logical(dfile, physical_size - 1) + 1

    def share(self, dfile: int, offset: int, length: int) -> tuple[int, int]:
        """``(physical offset, length)`` of ``dfile``'s part of a contiguous logical range."""
        start = self.physical_start(dfile, offset)
        return start, self.physical_start(dfile, offset + length) - start

    def segments(self, offset: int, length: int) -> Iterator[tuple[int, int, int]]:
        """Walk a logical range strip by strip: ``(dfile, physical offset, length)``."""
        end = offset + length
        while offset < end:
            n = min(end, (offset // self.strip_size + 1) * self.strip_size) - offset
            dfile = self.dfile_of(offset)
            yield dfile, self.physical_start(dfile, offset), n
            offset += n

    def stream_pieces(self, offset: int, length: int) -> StreamPieces:
        """A logical range's bytes per datafile: ``(dfile, pieces, bytes)`` for each datafile it
        touches, in order of first touch; ``pieces`` are ``(position in the range, length)``.

        They depend only on where the range starts within a stripe, so short ranges
        (up to ``_CACHED_STRIPS`` strips) are computed once per start and length."""
        phase = offset % (self.strip_size * self.dfile_count)
        if length <= _CACHED_STRIPS * self.strip_size:
            return _stream_pieces(self, phase, length)
        return _stream_pieces.__wrapped__(self, phase, length)


#: ``(dfile, ((position, length), ...), bytes)`` per datafile: see :meth:`SimpleStripe.stream_pieces`
StreamPieces = tuple[tuple[int, tuple[tuple[int, int], ...], int], ...]
_CACHED_STRIPS = 256


@functools.lru_cache(maxsize=1024)
def _stream_pieces(dist: SimpleStripe, phase: int, length: int) -> StreamPieces:
    per_dfile: dict[int, list[tuple[int, int]]] = {}
    pos = 0
    for n, _phys, k in dist.segments(phase, length):
        per_dfile.setdefault(n, []).append((pos, k))
        pos += k
    return tuple((n, tuple(pieces), sum(k for _, k in pieces)) for n, pieces in per_dfile.items())


def split_buffers(segments: Sequence[tuple[int, int]], buffer_size: int) -> list[list[tuple[int, int]]]:
    """Split a stream of physical ``(offset, length)`` segments into flow buffers.

    Each buffer holds at most ``buffer_size`` bytes of the stream; adjacent
    pieces inside a buffer are merged (one Trove list operation per buffer).
    """
    return list(iter_buffers(segments, buffer_size))


def iter_buffers(segments: Iterable[tuple[int, int]], buffer_size: int) -> Iterator[list[tuple[int, int]]]:
    """:func:`split_buffers`, one buffer at a time.  Every buffer but the last is full, so a
    stream of ``n`` bytes has :func:`buffer_count` buffers."""
    current: list[tuple[int, int]] = []
    room = buffer_size
    for off, length in segments:
        while length:
            n = min(length, room)
            if current and current[-1][0] + current[-1][1] == off:
                current[-1] = (current[-1][0], current[-1][1] + n)
            else:
                current.append((off, n))
            off += n
            length -= n
            room -= n
            if not room:
                yield current
                current, room = [], buffer_size
    if current:
        yield current


def buffer_count(nbytes: int, buffer_size: int) -> int:
    """The flow buffers of a stream of ``nbytes`` bytes."""
    return -(-nbytes // buffer_size)


#: A stream's flow buffers with the bytes of each: ``((pieces, nbytes), ...)``.
FlowBuffers = tuple[tuple[list[tuple[int, int]], int], ...]
#: Streams of at most this many flow buffers (and segments) have them computed once per shape.
_CACHED_BUFFERS = 64


def flow_buffers(segments: tuple[tuple[int, int], ...], buffer_size: int) -> FlowBuffers:
    """:func:`split_buffers` of a stream given as a tuple, each buffer with its bytes.  A short
    stream's are computed once per shape (client and servers meet the same shapes on every
    access); a long stream's each time, so that the cache's memory stays small."""
    if _short(segments, buffer_size):
        return _cached_flow_buffers(segments, buffer_size)
    return tuple(_with_bytes(iter_buffers(segments, buffer_size)))


def stream_buffers(segments: tuple[tuple[int, int], ...], buffer_size: int) -> Iterable[
        tuple[list[tuple[int, int]], int]]:
    """:func:`flow_buffers`, made one at a time as they are used for a long stream (a server's
    flow holds one buffer's pieces at a time, whatever the request's length)."""
    if _short(segments, buffer_size):
        return _cached_flow_buffers(segments, buffer_size)
    return _with_bytes(iter_buffers(segments, buffer_size))


def _short(segments: tuple[tuple[int, int], ...], buffer_size: int) -> bool:
    return len(segments) <= _CACHED_BUFFERS and sum(n for _, n in segments) <= _CACHED_BUFFERS * buffer_size


def _with_bytes(buffers: Iterable[list[tuple[int, int]]]) -> Iterator[tuple[list[tuple[int, int]], int]]:
    return ((pieces, sum(n for _, n in pieces)) for pieces in buffers)


@functools.lru_cache(maxsize=256)
def _cached_flow_buffers(segments: tuple[tuple[int, int], ...], buffer_size: int) -> FlowBuffers:
    return tuple(_with_bytes(iter_buffers(segments, buffer_size)))
