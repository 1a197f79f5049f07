"""Request state machines: one handler per request type, each a short sequence of steps.

    io (write):  ack (datafile size) -> write flow -> write completion
    io (read):   ack (datafile size) -> read flow
    small_io:    one Trove operation on the data inside the message -> response
    lookup / create / getattr / remove:   metadata store (sqlite) -> attributes
    getsize / truncate / flush / remove_dfile:   one Trove operation -> response

Every handler logs its request event (layer ``req``) and the disk operations it
causes (layer ``trove`` for bstreams, ``meta`` for the metadata store) with the
request's hints, so each carries the CallID(s) of the calls that caused it.
Handlers get the id of their request event (the parent of what they log) and
return the response to send; errors become error responses.
"""

from __future__ import annotations

import functools
import socket
from collections.abc import Callable
from dataclasses import dataclass

from server_sim import bmi
from server_sim import protocol as P
from server_sim.attribution import attribution
from server_sim.distribution import SimpleStripe
from server_sim.events import Who, now
from server_sim.flow import FlowContext, FlowSpec, read_flow, write_flow
from server_sim.trove import MetaStore


class RequestError(Exception):
    """A request that is answered with an error status."""

    def __init__(self, status: P.Status, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class ServerState:
    """What request handlers share: the server's layers, the file system layout and the
    connection (one per connection, reused by its requests)."""

    name: str
    flow: FlowContext
    meta: MetaStore | None
    io_servers: list[str]
    default_strip_size: int
    sock: socket.socket
    nbytes: int = 0  # the request's data bytes on this server (io, small_io), for its event
    t_recv: int = 0  # when the request being served arrived (its responses carry it)
    who: Who = (0, [], -1, -1)  # the request's event columns (ServerEvents.who of its hints)

    @property
    def events(self):
        return self.flow.events

    def frame(self, tag: int, msg: P.Message) -> list[memoryview]:
        """A response's buffers, to send later (stamped with the request's receive time)."""
        msg.t_recv, msg.t_send = self.t_recv, now()
        return bmi.frame(bmi.MODE_EXPECTED, tag, P.encode(msg))

    def send(self, tag: int, msg: P.Message) -> None:
        """Send a response on this connection."""
        bmi.send_buffers(self.sock, self.frame(tag, msg))


Handler = Callable[[ServerState, socket.socket, int, P.Message, int], P.Message | None]
HANDLERS: dict[type[P.Message], Handler] = {}


def handles(cls: type[P.Message]) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        HANDLERS[cls] = fn
        return fn
    return register


def _physical_segments(req: P.IoRequest | P.SmallIoRequest) -> tuple[tuple[int, int], ...]:
    """This datafile's physical segments of the request's logical regions, in stream order."""
    if req.strip_size <= 0 or not 0 <= req.dfile_nr < req.dfile_count:
        raise RequestError(P.Status.EINVAL, f"bad distribution {req.strip_size=} "
                                            f"{req.dfile_nr=} {req.dfile_count=}")
    dist = _stripe(req.strip_size, req.dfile_count)
    segments = []
    if len(req.regions) > P.MAX_IO_REGIONS:
        raise RequestError(P.Status.EINVAL, f"{len(req.regions)} regions, at most {P.MAX_IO_REGIONS}")
    for off, length in req.regions:
        start, n = dist.share(req.dfile_nr, off, length)
        if n:
            segments.append((start, n))
    return tuple(segments)


@functools.lru_cache(maxsize=64)
def _stripe(strip_size: int, dfile_count: int) -> SimpleStripe:
    return SimpleStripe(strip_size, dfile_count)


def _attribution(req: P.IoRequest | P.SmallIoRequest):
    return attribution(req.hints, _stripe(req.strip_size, req.dfile_count), req.dfile_nr)


def _op_name(req: P.IoRequest | P.SmallIoRequest, prefix: str) -> str:
    if req.io_type not in (P.IoType.READ, P.IoType.WRITE):
        raise RequestError(P.Status.EINVAL, f"bad io_type {req.io_type}")
    return f"{prefix}_{'write' if req.io_type == P.IoType.WRITE else 'read'}"


@handles(P.PingRequest)
def ping(st: ServerState, sock, tag, req, req_event) -> P.Message:
    return P.PingResponse(server=st.name)


@handles(P.IoRequest)
def io(st: ServerState, sock: socket.socket, tag: int, req: P.IoRequest, req_event: int) -> P.Message | None:
    _op_name(req, "io")  # validates io_type
    spec = FlowSpec(req.handle, _physical_segments(req), st.who, req_event,
                    _attribution(req) if req.hints.get("callid_map") else None)
    st.nbytes = sum(n for _, n in spec.segments)
    ack = P.IoResponse(bstream_size=st.flow.trove.size(req.handle), buffer_size=st.flow.buffer_size)
    if req.io_type == P.IoType.WRITE:
        st.send(tag, ack)
        written = write_flow(st.flow, sock, tag, spec)
        return P.WriteCompletion(bytes_written=written)
    read_flow(st.flow, sock, tag, spec, ahead=st.frame(tag, ack))  # the ack leaves with the first buffer
    return None


@handles(P.SmallIoRequest)
def small_io(st: ServerState, sock, tag, req: P.SmallIoRequest, req_event: int) -> P.Message:
    op = _op_name(req, "trove")
    segments = _physical_segments(req)
    total = st.nbytes = sum(n for _, n in segments)
    trove = st.flow.trove
    size = trove.size(req.handle)
    event_id = st.events.new_id()
    t0 = now()
    if req.io_type == P.IoType.WRITE:
        if len(req.data) != total:
            raise RequestError(P.Status.EINVAL, f"small_io carries {len(req.data)} bytes for {total}")
        if total:
            trove.write_list(req.handle, segments, memoryview(req.data))
        data = b""
    else:
        buf = bytearray(total)
        if total:
            trove.read_list(req.handle, segments, memoryview(buf))
        data = buf
    if total:
        who = st.events.who(_attribution(req)(segments))
        st.events.record(event_id, "trove", op, who, req_event, req.handle, segments[0][0], total, t0, now())
    return P.SmallIoResponse(bstream_size=size, bytes_done=total, data=data)


def _meta(st: ServerState) -> MetaStore:
    if st.meta is None:
        raise RequestError(P.Status.EINVAL, f"server {st.name} is not a metadata server")
    return st.meta


def _attr(found: tuple[int, int, list[tuple[str, int]]]) -> P.AttrResponse:
    handle, strip, dfiles = found
    return P.AttrResponse(handle=handle, strip_size=strip, dfile_handles=[h for _, h in dfiles],
                          dfile_servers=[s for s, _ in dfiles])


def _timed(st: ServerState, layer: str, op: str, req: P.Message, req_event: int, handle: int,
           fn: Callable[[], object], offset: int = 0, size: int = 0):
    """Run one disk operation and log it as an event of ``layer``."""
    event_id = st.events.new_id()
    t0 = now()
    result = fn()
    st.events.record(event_id, layer, op, st.who, req_event, handle, offset, size, t0, now())
    return result


@handles(P.LookupRequest)
def lookup(st: ServerState, sock, tag, req: P.LookupRequest, req_event: int) -> P.Message:
    found = _timed(st, "meta", "keyval_read", req, req_event, 0, lambda: _meta(st).lookup(req.path))
    if found is None:
        raise RequestError(P.Status.ENOENT, f"no such file {req.path!r}")
    return _attr(found)


@handles(P.GetattrRequest)
def getattr_(st: ServerState, sock, tag, req: P.GetattrRequest, req_event: int) -> P.Message:
    return lookup(st, sock, tag, req, req_event)


@handles(P.CreateRequest)
def create(st: ServerState, sock, tag, req: P.CreateRequest, req_event: int) -> P.Message:
    meta = _meta(st)
    if not st.io_servers:
        raise RequestError(P.Status.EINVAL, "the file system has no I/O server")
    # As ROMIO does, a striping_factor above the server count means "all servers".
    count = min(req.dfile_count or len(st.io_servers), len(st.io_servers))
    strip = req.strip_size or st.default_strip_size

    def do_create():
        found = meta.lookup(req.path)
        if found is not None:
            return found, False
        # Spread the first datafile over the servers, as PVFS2 picks a start server.
        start = len(req.path.encode()) % len(st.io_servers)
        servers = [st.io_servers[(start + i) % len(st.io_servers)] for i in range(count)]
        created = meta.create(req.path, strip, servers)
        return (created, True) if created is not None else (meta.lookup(req.path), False)

    found, created = _timed(st, "meta", "keyval_write", req, req_event, 0, do_create)
    if not created and req.exclusive:
        raise RequestError(P.Status.EEXIST, f"file {req.path!r} exists")
    return _attr(found)


@handles(P.RemoveRequest)
def remove(st: ServerState, sock, tag, req: P.RemoveRequest, req_event: int) -> P.Message:
    dfiles = _timed(st, "meta", "keyval_write", req, req_event, 0, lambda: _meta(st).remove(req.path))
    if dfiles is None:
        raise RequestError(P.Status.ENOENT, f"no such file {req.path!r}")
    return _attr((0, 0, dfiles))


@handles(P.SharedFpRequest)
def shared_fp(st: ServerState, sock, tag, req: P.SharedFpRequest, req_event: int) -> P.Message:
    previous = _timed(st, "meta", "keyval_write", req, req_event, req.handle,
                      lambda: _meta(st).shared_fp(req.handle, req.delta, bool(req.assign)))
    return P.SharedFpResponse(previous=previous)


@handles(P.HandleRequest)
def getsize(st: ServerState, sock, tag, req: P.HandleRequest, req_event: int) -> P.Message:
    trove = st.flow.trove
    size = _timed(st, "trove", "trove_getattr", req, req_event, req.handle, lambda: trove.size(req.handle))
    return P.SizeResponse(size=size)


@handles(P.TruncateRequest)
def truncate(st: ServerState, sock, tag, req: P.TruncateRequest, req_event: int) -> P.Message:
    trove = st.flow.trove
    _timed(st, "trove", "trove_truncate", req, req_event, req.handle,
           lambda: trove.truncate(req.handle, req.size), offset=req.size)
    return P.SizeResponse(size=req.size)


@handles(P.FlushRequest)
def flush(st: ServerState, sock, tag, req: P.FlushRequest, req_event: int) -> P.Message:
    trove = st.flow.trove
    _timed(st, "trove", "trove_flush", req, req_event, req.handle, lambda: trove.flush(req.handle))
    return P.EmptyResponse()


@handles(P.RemoveDfileRequest)
def remove_dfile(st: ServerState, sock, tag, req: P.RemoveDfileRequest, req_event: int) -> P.Message:
    trove = st.flow.trove
    _timed(st, "trove", "trove_remove", req, req_event, req.handle, lambda: trove.remove(req.handle))
    return P.EmptyResponse()


#: The request event's op name for each request type.
REQUEST_OPS: dict[type[P.Message], Callable[[P.Message], str]] = {
    P.PingRequest: lambda r: "ping",
    P.IoRequest: lambda r: _op_name(r, "io"),
    P.SmallIoRequest: lambda r: _op_name(r, "small_io"),
    P.LookupRequest: lambda r: "lookup",
    P.GetattrRequest: lambda r: "getattr",
    P.CreateRequest: lambda r: "create",
    P.RemoveRequest: lambda r: "remove",
    P.HandleRequest: lambda r: "getsize",
    P.TruncateRequest: lambda r: "truncate",
    P.FlushRequest: lambda r: "flush",
    P.RemoveDfileRequest: lambda r: "remove_dfile",
    P.SharedFpRequest: lambda r: "shared_fp",
}
