"""BMI: message framing over stream sockets, as BMI/TCP does it.

Every message is preceded by a frame header (magic, mode, tag, size).  Requests
travel as *unexpected* messages limited to 16 KiB; responses and flow buffers
are *expected* messages matched by tag, limited to 16 MiB.
"""

from __future__ import annotations

import socket
import struct

BMI_MAGIC = 0x51A7B0E1
MODE_UNEXPECTED = 1
MODE_EXPECTED = 2
UNEXPECTED_LIMIT = 16 * 1024
MESSAGE_LIMIT = 16 * 1024 * 1024

FRAME = struct.Struct("<IIQQ")  # magic, mode, tag, size
_IOV_MAX = 512  # buffers per sendmsg/recvmsg (the kernel allows 1024)


class BmiError(ConnectionError):
    """The peer closed the connection or broke the framing rules."""


class MessageTooBig(BmiError):
    """A message over its size limit (the payload is still on the wire unless ``fatal``)."""

    def __init__(self, msg: str, size: int, fatal: bool, tag: int = 0) -> None:
        super().__init__(msg)
        self.size = size
        self.fatal = fatal
        self.tag = tag


def frame(mode: int, tag: int, *parts: bytes | bytearray | memoryview) -> list[memoryview]:
    """One framed message made of ``parts``: the buffers to send (no copy of the parts)."""
    size = sum(memoryview(p).nbytes for p in parts)
    limit = UNEXPECTED_LIMIT if mode == MODE_UNEXPECTED else MESSAGE_LIMIT
    if size > limit:
        raise MessageTooBig(f"message of {size} bytes exceeds the {limit}-byte limit", size, False)
    buffers = [memoryview(FRAME.pack(BMI_MAGIC, mode, tag, size))]
    buffers += [memoryview(p).cast("B") for p in parts if memoryview(p).nbytes]
    return buffers


def send_buffers(sock: socket.socket, buffers: list[memoryview]) -> None:
    """Send framed messages' buffers, several at a time (scatter/gather)."""
    sent = sock.sendmsg(buffers[:_IOV_MAX])
    if len(buffers) <= _IOV_MAX and sent == sum(b.nbytes for b in buffers):
        return  # (the usual case: the socket took everything at once)
    buffers = list(buffers)
    while True:
        while buffers and sent >= buffers[0].nbytes:
            sent -= buffers[0].nbytes
            buffers.pop(0)
        if not buffers:
            return
        if sent:
            buffers[0] = buffers[0][sent:]
        sent = sock.sendmsg(buffers[:_IOV_MAX])


def send(sock: socket.socket, mode: int, tag: int, *parts: bytes | bytearray | memoryview) -> None:
    """Send one framed message made of ``parts`` (zero-copy scatter/gather)."""
    send_buffers(sock, frame(mode, tag, *parts))


def recv_exact_into(sock: socket.socket, view: memoryview) -> None:
    """Fill ``view`` from the socket or raise :class:`BmiError` if the peer closes."""
    got = 0
    n = view.nbytes
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if not k:
            raise BmiError("connection closed by peer")
        got += k


def recv_header(sock: socket.socket) -> tuple[int, int, int] | None:
    """Read a frame header; return ``(mode, tag, size)``, or None on a clean close."""
    raw = bytearray(FRAME.size)
    view = memoryview(raw)
    first = sock.recv_into(view)
    if not first:
        return None
    if first < FRAME.size:
        recv_exact_into(sock, view[first:])
    magic, mode, tag, size = FRAME.unpack(raw)
    if magic != BMI_MAGIC:
        raise MessageTooBig(f"bad frame magic {magic:#x}", size, True, tag)
    if mode not in (MODE_UNEXPECTED, MODE_EXPECTED):
        raise MessageTooBig(f"bad frame mode {mode}", size, True, tag)
    if size > MESSAGE_LIMIT:
        raise MessageTooBig(f"message of {size} bytes exceeds the {MESSAGE_LIMIT}-byte limit", size, True,
                             tag)
    if mode == MODE_UNEXPECTED and size > UNEXPECTED_LIMIT:
        raise MessageTooBig(
            f"unexpected message of {size} bytes exceeds the {UNEXPECTED_LIMIT}-byte limit",
            size, False, tag,
        )
    return mode, tag, size


def recv_payload(sock: socket.socket, size: int) -> bytearray:
    """Read a payload of ``size`` bytes into a new buffer."""
    buf = bytearray(size)
    recv_exact_into(sock, memoryview(buf))
    return buf


def discard(sock: socket.socket, size: int) -> None:
    """Read and drop ``size`` bytes (a rejected payload), keeping the stream in sync."""
    scratch = memoryview(bytearray(min(size, 1 << 16) or 1))
    while size:
        n = min(size, scratch.nbytes)
        recv_exact_into(sock, scratch[:n])
        size -= n


def recv_expected(sock: socket.socket, tag: int) -> bytearray:
    """Receive the next message, which must be an expected one with ``tag``."""
    header = recv_header(sock)
    if header is None:
        raise BmiError("connection closed by peer")
    mode, got_tag, size = header
    if mode != MODE_EXPECTED or got_tag != tag:
        raise BmiError(f"expected message with tag {tag}, got mode {mode} tag {got_tag}")
    return recv_payload(sock, size)


def recv_expected_into(sock: socket.socket, tag: int, *views: memoryview) -> None:
    """Receive an expected message with ``tag`` and exactly the size of ``views`` (byte
    memoryviews), straight into them.

    The frame header and the payload arrive together (scatter/gather, one system call
    for whatever the kernel holds); the header is checked as soon as it is complete."""
    header = bytearray(FRAME.size)
    size = sum(v.nbytes for v in views)
    buffers = [memoryview(header), *(v for v in views if v.nbytes)]
    got = 0
    while buffers:
        n = sock.recvmsg_into(buffers[:_IOV_MAX])[0]
        if not n:
            raise BmiError("connection closed by peer")
        if got < FRAME.size <= got + n:
            magic, mode, got_tag, got_size = FRAME.unpack(header)
            if magic != BMI_MAGIC or mode != MODE_EXPECTED or got_tag != tag or got_size != size:
                raise BmiError(f"expected a {size}-byte message with tag {tag}, got mode {mode} "
                               f"tag {got_tag} size {got_size}")
        got += n
        if got == FRAME.size + size:
            return  # (the usual case: one call)
        while buffers and n >= buffers[0].nbytes:
            n -= buffers[0].nbytes
            buffers.pop(0)
        if n:
            buffers[0] = buffers[0][n:]


def connect(host: str, port: int, timeout: float | None = 30.0) -> socket.socket:
    """Open a TCP connection with Nagle off, as BMI/TCP does."""
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.settimeout(None)
    return sock
