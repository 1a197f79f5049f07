"""BMI: message framing over stream sockets, as BMI/TCP does it.

Every message is preceded by a frame header (magic, mode, tag, size).  Requests
travel as *unexpected* messages limited to 16 KiB; responses and flow buffers
are *expected* messages matched by tag, limited to 16 MiB.

A connection starts with a handshake (frames of mode ``MODE_AUTH``, tag 0) in which the
client proves that it holds the file system's secret, and the server that it holds it too
(HMAC-SHA256 over both sides' random nonces; the secret never travels):

* server -> client, at once: ``HELLO`` = status (u32: 0, or the errno of a refusal, e.g.
  EAGAIN when the server is full), handshake version (u32), server nonce (32 bytes);
* client -> server: ``PROOF`` = client nonce (32 bytes), HMAC(secret, "callid client" +
  server nonce + client nonce) (32 bytes);
* server -> client: ``VERDICT`` = status (u32: 0, or EACCES), HMAC(secret, "callid server" +
  server nonce + client nonce) (32 bytes; zeros on a refusal).

One round trip per connection, none per request.  A peer that sends anything else than its
proof is refused (:class:`Refused`) and the connection closed.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import os
import secrets
import socket
import struct
import time

from callid_core.errors import Failed

BMI_MAGIC = 0x51A7B0E1
MODE_UNEXPECTED = 1
MODE_EXPECTED = 2
MODE_AUTH = 3  # the handshake's frames
UNEXPECTED_LIMIT = 16 * 1024
MESSAGE_LIMIT = 16 * 1024 * 1024

FRAME = struct.Struct("<IIQQ")  # magic, mode, tag, size
_IOV_MAX = 512  # buffers per sendmsg/recvmsg (the kernel allows 1024)
#: Bytes of a flow's buffers (expected messages) sent or received together, in one system call
#: where the socket allows: by the server for a read, by the client and the server for a write.
FLOW_BATCH = 1 << 20
_GROW = 1 << 16  # a payload's buffer starts this big and doubles as its bytes arrive

#: Bump when a handshake message changes.
HANDSHAKE_VERSION = 1
NONCE_BYTES = 32
HELLO = struct.Struct("<II32s")  # status, handshake version, server nonce
PROOF = struct.Struct("<32s32s")  # client nonce, the client's HMAC
VERDICT = struct.Struct("<I32s")  # status, the server's HMAC


class BmiError(Failed, ConnectionError):
    """The peer closed the connection or broke the framing rules."""


class Refused(BmiError):
    """A peer that did not prove it holds the file system's secret.  ``request``: the tag and
    size of the request it sent instead of its proof (its payload still on the wire), or None."""

    def __init__(self, msg: str, request: tuple[int, int] | None = None) -> None:
        super().__init__(msg)
        self.request = request


class MessageTooBig(BmiError):
    """A message over its size limit (the payload is still on the wire unless ``fatal``)."""

    def __init__(self, msg: str, size: int, fatal: bool, tag: int = 0) -> None:
        super().__init__(msg)
        self.size = size
        self.fatal = fatal
        self.tag = tag


def frame(mode: int, tag: int, *parts: bytes | bytearray | memoryview) -> list[memoryview]:
    """One framed message made of ``parts``: the buffers to send (byte views, no copy of the parts)."""
    views = [v if v.format == "B" and v.ndim == 1 else v.cast("B") for v in map(memoryview, parts)]
    size = sum(map(len, views))
    limit = UNEXPECTED_LIMIT if mode == MODE_UNEXPECTED else MESSAGE_LIMIT
    if size > limit:
        raise MessageTooBig(f"message of {size} bytes exceeds the {limit}-byte limit", size, False)
    views.insert(0, memoryview(FRAME.pack(BMI_MAGIC, mode, tag, size)))
    return views


def send_buffers(sock: socket.socket, buffers: list[memoryview]) -> None:
    """Send framed messages' buffers (byte views), several at a time (scatter/gather)."""
    sent = sock.sendmsg(buffers[:_IOV_MAX])
    if len(buffers) <= _IOV_MAX and sent == sum(map(len, buffers)):
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
    """Read a payload of ``size`` bytes into a new buffer, which grows as the bytes arrive (a
    peer that announces a big message and sends nothing makes nothing be allocated)."""
    buf = bytearray(min(size, _GROW))
    got = 0
    while True:
        recv_exact_into(sock, memoryview(buf)[got:])
        got = len(buf)
        if got == size:
            return buf
        buf += bytes(min(size - got, got))


def discard(sock: socket.socket, size: int) -> None:
    """Read and drop ``size`` bytes (a rejected payload), keeping the stream in sync."""
    scratch = memoryview(bytearray(min(size, 1 << 16) or 1))
    while size:
        n = min(size, scratch.nbytes)
        recv_exact_into(sock, scratch[:n])
        size -= n


def recv_expected(sock: socket.socket, tag: int, expect: int = 64) -> memoryview:
    """Receive the next message, which must be an expected one with ``tag`` (a response).

    The header and ``expect`` payload bytes are asked for in one system call: a longer
    payload is then read on; a shorter one must be the last thing the peer sent (as a
    response is, but for a read's acknowledgement: see :func:`recv_messages_into`), else
    the framing is lost and :class:`BmiError` says so."""
    buf = bytearray(FRAME.size + expect)
    view = memoryview(buf)
    got = sock.recv_into(view)
    if not got:
        raise BmiError("connection closed by peer")
    if got < FRAME.size:
        recv_exact_into(sock, view[got:FRAME.size])
        got = FRAME.size
    magic, mode, got_tag, size = FRAME.unpack_from(buf)
    if magic != BMI_MAGIC or mode != MODE_EXPECTED or got_tag != tag or size > MESSAGE_LIMIT:
        raise BmiError(f"expected message with tag {tag}, got magic {magic:#x} mode {mode} tag {got_tag} "
                       f"size {size}")
    end = FRAME.size + size
    if got > end:
        raise BmiError(f"a {size}-byte message with more data behind it (expected {expect} bytes)")
    if size > expect:  # (room for the rest)
        view.release()
        buf += bytes(size - expect)
        view = memoryview(buf)
    if got < end:
        recv_exact_into(sock, view[got:end])
    return view[FRAME.size:end]


def recv_expected_into(sock: socket.socket, tag: int, *views: memoryview) -> None:
    """Receive an expected message with ``tag`` and exactly the size of ``views`` (byte
    memoryviews), straight into them."""
    recv_messages_into(sock, tag, [list(views)])


def recv_messages_into(sock: socket.socket, tag: int, messages: list[list[memoryview]],
                       short_first: bool = False) -> int:
    """Receive consecutive expected messages with ``tag``, each exactly the size of its
    views (byte memoryviews), straight into them; return the size of the first.

    Headers and payloads arrive together (scatter/gather, one system call for whatever
    the kernel holds); each header is checked as soon as it is complete.  With
    ``short_first`` the first message (a response) may be shorter than its views: then
    it is the last thing the peer sent, and nothing more is read."""
    headers: list[bytearray] = []
    buffers: list[memoryview] = []
    sizes: list[int] = []
    for views in messages:
        headers.append(bytearray(FRAME.size))
        buffers.append(memoryview(headers[-1]))
        buffers += views
        sizes.append(sum(map(len, views)))
    total = FRAME.size * len(messages) + sum(sizes)
    got = checked = i = 0  # i: the first buffer not yet full
    header_end = FRAME.size  # where the next header to check ends in the stream
    while True:
        n = sock.recvmsg_into(buffers[i:i + _IOV_MAX])[0]
        if not n:
            raise BmiError("connection closed by peer")
        got += n
        while checked < len(sizes) and got >= header_end:
            magic, mode, got_tag, got_size = FRAME.unpack(headers[checked])
            size = sizes[checked]
            short = checked == 0 and short_first and got_size < size
            fits = got_size == size or short
            if magic != BMI_MAGIC or mode != MODE_EXPECTED or got_tag != tag or not fits:
                raise BmiError(f"expected a {size}-byte message with tag {tag}, got mode {mode} "
                               f"tag {got_tag} size {got_size}")
            if short:
                sizes[0] = got_size
                total = FRAME.size + got_size
                if got > total:
                    raise BmiError(f"a {got_size}-byte response with more data behind it")
                break
            header_end += size + FRAME.size
            checked += 1
        if got == total:
            return sizes[0]  # (the usual case for one message: one call)
        while n >= len(buffers[i]):
            n -= len(buffers[i])
            i += 1
        if n:
            buffers[i] = buffers[i][n:]


def connect(host: str, port: int, timeout: float | None = 30.0, secret: bytes | None = None) -> socket.socket:
    """Open a TCP connection with Nagle off, as BMI/TCP does, and prove that this client holds the
    file system's ``secret`` (the handshake; None: none, for peers that do not ask for it).
    :class:`BmiError` (an OSError) if the server refuses the connection or does not prove it holds
    the secret too."""
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if secret is not None:
            _prove(sock, secret, f"{host}:{port}")
        sock.settimeout(None)
    except BaseException:
        sock.close()
        raise
    return sock


def _mac(secret: bytes, who: bytes, server_nonce: bytes, client_nonce: bytes) -> bytes:
    return hmac.new(secret, b"callid " + who + server_nonce + client_nonce, hashlib.sha256).digest()


def _recv_handshake(sock: socket.socket, size: int, peer: str) -> bytes:
    """The payload of the next handshake frame, which must be ``size`` bytes long."""
    raw = bytearray(FRAME.size + size)
    recv_exact_into(sock, memoryview(raw)[:FRAME.size])
    magic, mode, _, got = FRAME.unpack_from(raw)
    if magic != BMI_MAGIC or mode != MODE_AUTH or got != size:
        raise BmiError(f"{peer} does not speak the handshake (a mode {mode} frame of {got} bytes)")
    recv_exact_into(sock, memoryview(raw)[FRAME.size:])
    return bytes(raw[FRAME.size:])


def _prove(sock: socket.socket, secret: bytes, peer: str) -> None:
    """The client's half of the handshake."""
    status, version, server_nonce = HELLO.unpack(_recv_handshake(sock, HELLO.size, f"server {peer}"))
    if status:
        raise BmiError(f"server {peer} refused the connection: {os.strerror(status)}")
    if version != HANDSHAKE_VERSION:
        raise BmiError(f"server {peer} speaks handshake version {version}, not {HANDSHAKE_VERSION}")
    nonce = secrets.token_bytes(NONCE_BYTES)
    send(sock, MODE_AUTH, 0, PROOF.pack(nonce, _mac(secret, b"client", server_nonce, nonce)))
    status, mac = VERDICT.unpack(_recv_handshake(sock, VERDICT.size, f"server {peer}"))
    if status:
        raise BmiError(f"server {peer} refused the connection: {os.strerror(status)} (this client does not "
                       "hold the file system's secret)")
    if not hmac.compare_digest(mac, _mac(secret, b"server", server_nonce, nonce)):
        raise BmiError(f"server {peer} does not hold the file system's secret")


def refuse(sock: socket.socket, status: int) -> None:
    """Tell a new connection that it is refused (its hello says ``status``, an errno); the caller
    closes it."""
    send(sock, MODE_AUTH, 0, HELLO.pack(status, HANDSHAKE_VERSION, bytes(NONCE_BYTES)))


def authenticate(sock: socket.socket, secret: bytes, within: float) -> None:
    """The server's half of the handshake: return when the peer proved it holds ``secret`` within
    ``within`` seconds in all (however slowly its bytes come); else raise :class:`Refused` (after
    telling a peer with a wrong proof so)."""
    deadline = time.monotonic() + within

    def recv_into(view: memoryview) -> None:  # (recv_exact_into, each wait cut to the time left)
        got = 0
        while got < view.nbytes:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Refused(f"it did not prove it holds the file system's secret within {within:g} s")
            set_timeout(sock, left)
            try:
                k = sock.recv_into(view[got:])
            except BlockingIOError:  # (the kernel's timeout)
                continue
            if not k:
                raise BmiError("connection closed by peer")
            got += k

    nonce = secrets.token_bytes(NONCE_BYTES)
    send(sock, MODE_AUTH, 0, HELLO.pack(0, HANDSHAKE_VERSION, nonce))
    raw = bytearray(FRAME.size)
    recv_into(memoryview(raw))
    magic, mode, tag, size = FRAME.unpack(raw)
    if magic == BMI_MAGIC and mode == MODE_UNEXPECTED:
        raise Refused("it sent a request without proving it holds the file system's secret", (tag, size))
    if magic != BMI_MAGIC or mode != MODE_AUTH or size != PROOF.size:
        raise Refused(f"it sent a frame of magic {magic:#x}, mode {mode} and {size} bytes, not its proof")
    proof = bytearray(size)
    recv_into(memoryview(proof))
    client_nonce, mac = PROOF.unpack(proof)
    if not hmac.compare_digest(mac, _mac(secret, b"client", nonce, client_nonce)):
        send(sock, MODE_AUTH, 0, VERDICT.pack(errno.EACCES, bytes(NONCE_BYTES)))
        raise Refused("its proof is wrong: it does not hold the file system's secret")
    send(sock, MODE_AUTH, 0, VERDICT.pack(0, _mac(secret, b"server", nonce, client_nonce)))


def set_timeout(sock: socket.socket, seconds: float) -> None:
    """Make a receive or a send on ``sock`` fail (an OSError) after ``seconds`` without progress.
    Kernel timeouts (SO_RCVTIMEO, SO_SNDTIMEO): the socket stays blocking, with no poll per call
    (as Python's own socket timeouts would add)."""
    whole = int(seconds)
    tv = struct.pack("@ll", whole, int((seconds - whole) * 1_000_000))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
