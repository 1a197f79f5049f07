"""Request state machines, declared as PVFS2's ``*.sm`` files declare them, and their actions.

:data:`MACHINES` names each machine's states in the order they run; each state is the
action of that name below.  An action takes the request's context, the request and what
the previous state returned (None for the first) and returns what the next state needs;
the last state returns the reply (None: it has left already).  Each state goes on to the
next when its action returns; when it raises :class:`RequestError` (or an OSError from
the disk: EIO) the machine ends and the request is answered with an ErrorResponse.  A
machine is named as the event of its request: the op's name, with the I/O type for I/O.
"""

from __future__ import annotations

import errno
import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from callid_core.choices import SERVER_LAYERS
from callid_core.errors import CallidError
from callid_core.partlog import is_part
from server_sim import bmi, flow
from server_sim import protocol as P
from server_sim.attribution import Attribution
from server_sim.context import RequestContext
from server_sim.distribution import SimpleStripe
from server_sim.events import now
from server_sim.flow import Segments
from server_sim.trove import FileRecord, MetaStore
from server_sim.validate import Invalid, check_request

log = logging.getLogger("server_sim.requests")

#: Each machine's states, in the order they run (every failure ends in an error reply).
MACHINES: dict[str, tuple[str, ...]] = {
    # I/O (io.sm): the ack says the datafile's size and the flow buffer size, a flow moves the data
    "io_write": ("io_prelude", "send_ack", "write_flow", "write_completion"),
    "io_read": ("io_prelude", "read_flow"),  # (the ack leaves with the flow's first buffers)
    # small I/O (small-io.sm): the data travels inside the request (write) or the reply (read)
    "small_io_write": ("io_prelude", "trove_write", "small_io_reply"),
    "small_io_read": ("io_prelude", "trove_read", "small_io_reply"),
    # the metadata server's namespace: one keyval (sqlite) transaction
    "lookup": ("keyval_read", "attr_reply"),
    "getattr": ("keyval_read", "attr_reply"),
    "create": ("pick_layout", "keyval_create", "create_reply"),
    "remove": ("keyval_remove", "attr_reply"),
    "shared_fp": ("keyval_fetch_add", "shared_fp_reply"),
    # an I/O server's datafile: one Trove operation
    "getsize": ("trove_getattr", "size_reply"),
    "truncate": ("trove_truncate", "size_reply"),
    "flush": ("trove_flush", "empty_reply"),
    "create_dfile": ("trove_create", "empty_reply"),
    "remove_dfile": ("trove_remove", "empty_reply"),
    "ping": ("ping_reply",),
    # the server's own event log (a run takes it over the wire: the server may be on another host)
    "log_flush": ("log_flush",),
    "log_read": ("log_read",),
    "log_remove": ("log_remove",),
    # the layers the server logs (the event mask), set at run time: the change is an event of its own
    "event_mask": ("event_mask",),
}
#: Machines whose request leaves no event (liveness checks, and the requests taking the event log).
UNLOGGED = frozenset({"ping", "log_flush", "log_read", "log_remove", "event_mask"})


class RequestError(CallidError):
    """A request that is answered with an error status."""

    def __init__(self, status: P.Status, message: str) -> None:
        super().__init__(message)
        self.status = status


Action = Callable[[RequestContext, Any, Any], Any]
_ACTIONS: dict[str, Action] = {}


class Machine(NamedTuple):
    """A machine of :data:`MACHINES`, compiled: its name (the op of its request's event), its
    states' actions in order and whether its request is logged."""

    name: str
    actions: tuple[Action, ...]
    logged: bool


def machine_for(req: P.Message) -> Machine:
    """The machine that serves ``req``; :class:`RequestError` if none does, or if a field or hint
    of ``req`` has a value its declaration does not allow (``server_sim.validate``: checked here,
    before anything of the request is used or logged)."""
    if not isinstance(req, P.Request):
        raise RequestError(P.Status.ENOSYS, f"{type(req).__name__} is not a request")
    try:
        check_request(req)
    except Invalid as exc:
        raise RequestError(P.Status.EINVAL, str(exc)) from None
    found = _MACHINES.get((req.OP, getattr(req, "io_type", None)))
    if found is None:
        raise RequestError(P.Status.EINVAL, f"{req.NAME} request of unknown io_type {req.io_type}")
    return found


#: the statuses of the disk's errors a client can act on (any other is EIO)
_OS_STATUS = {errno.ENOSPC: P.Status.ENOSPC, errno.EFBIG: P.Status.EFBIG, errno.ENOENT: P.Status.ENOENT}


def serve(ctx: RequestContext, req: P.Request, machine: Machine) -> P.Response | None:
    """Run ``machine`` for ``req``; return its reply (an ErrorResponse if a state failed).
    The request's event is recorded when the machine ends."""
    value = None
    try:
        for act in machine.actions:
            value = act(ctx, req, value)
        return value
    except RequestError as exc:
        log.info("%s request failed: %s", machine.name, exc)
        return req.error(exc.status)
    except bmi.BmiError:
        raise
    except OSError as exc:  # (a full disk or too large a file says so; any other error is EIO)
        log.warning("I/O error: %s", exc)
        return req.error(_OS_STATUS.get(exc.errno, P.Status.EIO))
    except Exception:  # a bad request answered, the connection and the server kept
        log.exception("%s request failed", machine.name)
        return req.error(P.Status.EIO)
    finally:
        try:
            ctx.finish()
        except Exception:  # (its reply still leaves)
            log.exception("%s request: its event was not logged", machine.name)


def action(fn: Action) -> Action:
    """Register ``fn`` as the action of the state of its name."""
    _ACTIONS[fn.__name__] = fn
    return fn


# --------------------------------------------------------------------------- I/O

@functools.lru_cache(maxsize=64)
def _stripe(strip_size: int, dfile_count: int) -> SimpleStripe:
    return SimpleStripe(strip_size, dfile_count)


def _ack(ctx: RequestContext, req: P.IoRequest) -> P.Response:
    return req.reply(bstream_size=ctx.state.trove.size(req.handle), buffer_size=ctx.state.flow_buffer)


def _created(ctx: RequestContext, handle: int) -> None:
    """ENOENT unless the datafile ``handle`` was created on this server (``create_dfile``)."""
    if not ctx.state.trove.exists(handle):
        raise RequestError(P.Status.ENOENT, f"no datafile {handle} on server {ctx.state.name}")


@action
def io_prelude(ctx: RequestContext, req: P.IoRequest, _: None) -> Segments:
    """Check the datafile (created: ENOENT), the payload (the file system's) and the distribution;
    cut the regions into this datafile's physical segments, in stream order; check that they are no
    more than the server allows (E2BIG: a small I/O's data limit, the flow length of the
    configuration); set up the attribution of the request's disk operations."""
    _created(ctx, req.handle)
    if req.payload != ctx.state.payload:
        raise RequestError(P.Status.EINVAL, f"{req.NAME} request with payload "
                                            f"{P.PayloadCode(req.payload).name.lower()} on a file system "
                                            f"with payload {P.PayloadCode(ctx.state.payload).name.lower()}")
    if req.strip_size <= 0 or not 0 <= req.dfile_nr < req.dfile_count:
        raise RequestError(P.Status.EINVAL, f"bad distribution {req.strip_size=} "
                                            f"{req.dfile_nr=} {req.dfile_count=}")
    if len(req.regions) > P.MAX_IO_REGIONS:
        raise RequestError(P.Status.EINVAL, f"{len(req.regions)} regions, at most {P.MAX_IO_REGIONS}")
    dist = _stripe(req.strip_size, req.dfile_count)
    segments = []
    for off, length in req.regions:
        start, n = dist.share(req.dfile_nr, off, length)
        if n:
            segments.append((start, n))
    nbytes = sum(n for _, n in segments)
    limit = P.SMALL_IO_MAX_DATA if isinstance(req, P.SmallIoRequest) else ctx.state.max_flow
    if nbytes > limit:
        raise RequestError(P.Status.E2BIG, f"{req.NAME} request of {nbytes} bytes on this datafile, "
                                           f"at most {limit}")
    ctx.nbytes = nbytes
    ctx.layout = (dist, req.dfile_nr)
    ctx.attribution = Attribution(ctx.who.callids, req.hints.get("callid_bytes"))
    return tuple(segments)


@action
def send_ack(ctx: RequestContext, req: P.IoRequest, segments: Segments) -> Segments:
    """Acknowledge a write: after this the client sends the flow's buffers."""
    ctx.send(_ack(ctx, req))
    return segments


@action
def write_flow(ctx: RequestContext, req: P.IoRequest, segments: Segments) -> int:
    """Receive and write every buffer (all are drained even after a disk error); the bytes written."""
    return flow.write_flow(ctx, req.handle, segments)


@action
def write_completion(ctx: RequestContext, req: P.IoRequest, written: int) -> P.Response:
    return req.completion(bytes_written=written)


@action
def read_flow(ctx: RequestContext, req: P.IoRequest, segments: Segments) -> None:
    """Read and send every buffer, the acknowledgement ahead of the first: nothing is left to reply."""
    flow.read_flow(ctx, req.handle, segments, ahead=ctx.frame(_ack(ctx, req)))


def _small_op(ctx: RequestContext, req: P.SmallIoRequest, op: str,
              fn: Callable[[int, Segments, memoryview | None], int], segments: Segments,
              view: memoryview | None) -> None:
    """One Trove list operation on the whole of a small I/O, recorded under the request (attributed
    as the request's only operation); ``view`` None: sizes only."""
    dist, dfile = ctx.layout
    attribution = ctx.attribution
    attribution.expect(1)
    event_id = ctx.new_id()
    t0 = now()
    fn(req.handle, segments, view)
    ctx.record(event_id=event_id, layer="trove", op=op, parent=ctx.event_id, handle=req.handle,
               offset=segments[0][0], size=ctx.nbytes, t_start=t0, t_end=now(),
               share=attribution.share(0, ctx.nbytes), file_range=dist.logical_extent(dfile, segments))


@action
def trove_write(ctx: RequestContext, req: P.SmallIoRequest, segments: Segments) -> tuple[int, bytes]:
    """Write the data the request carries (payload NONE: it carries none); the datafile's size
    before, and no data to return."""
    trove = ctx.state.trove
    size = trove.size(req.handle)
    carried = ctx.nbytes if trove.STORES_DATA else 0
    if len(req.data) != carried:
        raise RequestError(P.Status.EINVAL, f"small_io carries {len(req.data)} bytes for {carried}")
    if ctx.nbytes:
        _small_op(ctx, req, "trove_write", trove.write_list, segments,
                  memoryview(req.data) if trove.STORES_DATA else None)
    return size, b""


@action
def trove_read(ctx: RequestContext, req: P.SmallIoRequest, segments: Segments) -> tuple[int, bytearray]:
    """Read the segments; the datafile's size before, and the data for the reply (payload NONE:
    none)."""
    trove = ctx.state.trove
    size = trove.size(req.handle)
    data = bytearray(ctx.nbytes if trove.STORES_DATA else 0)
    if ctx.nbytes:
        _small_op(ctx, req, "trove_read", trove.read_list, segments,
                  memoryview(data) if trove.STORES_DATA else None)
    return size, data


@action
def small_io_reply(ctx: RequestContext, req: P.SmallIoRequest, done: tuple[int, bytes]) -> P.Response:
    size, data = done
    return req.reply(bstream_size=size, bytes_done=ctx.nbytes, data=data)


# --------------------------------------------------------------------------- metadata


def _meta(ctx: RequestContext) -> MetaStore:
    if ctx.state.meta is None:
        raise RequestError(P.Status.EINVAL, f"server {ctx.state.name} is not a metadata server")
    return ctx.state.meta


@action
def keyval_read(ctx: RequestContext, req: P.LookupRequest | P.GetattrRequest, _: None) -> FileRecord:
    """The file's record; ENOENT if there is none."""
    meta = _meta(ctx)
    found = ctx.timed("meta", "keyval_read", lambda: meta.lookup(req.path))
    if found is None:
        raise RequestError(P.Status.ENOENT, f"no such file {req.path!r}")
    return found


@action
def pick_layout(ctx: RequestContext, req: P.CreateRequest, _: None) -> tuple[int, list[str]]:
    """The strip size and the datafiles' servers of a new file."""
    servers = ctx.state.io_servers
    if not servers:
        raise RequestError(P.Status.EINVAL, "the file system has no I/O server")
    # As ROMIO does, a striping_factor above the server count means "all servers";
    # the first datafile is spread over the servers, as PVFS2 picks a start server.
    count = min(req.dfile_count or len(servers), len(servers))
    start = len(req.path.encode()) % len(servers)
    return req.strip_size or ctx.state.default_strip_size, [servers[(start + i) % len(servers)]
                                                            for i in range(count)]


@action
def keyval_create(ctx: RequestContext, req: P.CreateRequest,
                  layout: tuple[int, list[str]]) -> tuple[FileRecord, bool]:
    """Create the file unless it exists (then EEXIST if the create is exclusive); the file's record
    and whether this request made it."""
    meta = _meta(ctx)

    def create() -> tuple[FileRecord | None, bool]:
        found = meta.lookup(req.path)
        if found is not None:
            return found, False
        created = meta.create(req.path, *layout)
        return (created, True) if created is not None else (meta.lookup(req.path), False)

    found, created = ctx.timed("meta", "keyval_write", create)
    if not created and req.exclusive:
        raise RequestError(P.Status.EEXIST, f"file {req.path!r} exists")
    return found, created


@action
def keyval_remove(ctx: RequestContext, req: P.RemoveRequest, _: None) -> FileRecord:
    """Remove the file; its datafiles (no handle, no strip size)."""
    meta = _meta(ctx)
    dfiles = ctx.timed("meta", "keyval_write", lambda: meta.remove(req.path))
    if dfiles is None:
        raise RequestError(P.Status.ENOENT, f"no such file {req.path!r}")
    return 0, 0, dfiles


def _attrs(req: P.Request, found: FileRecord, created: bool) -> P.Response:
    handle, strip, dfiles = found
    return req.reply(handle=handle, strip_size=strip, dfile_handles=[h for _, h in dfiles],
                     dfile_servers=[s for s, _ in dfiles], created=int(created))


@action
def attr_reply(ctx: RequestContext, req: P.Request, found: FileRecord) -> P.Response:
    return _attrs(req, found, False)


@action
def create_reply(ctx: RequestContext, req: P.CreateRequest, done: tuple[FileRecord, bool]) -> P.Response:
    """The file's record, saying whether this request made it (the client then creates its datafiles)."""
    return _attrs(req, *done)


@action
def keyval_fetch_add(ctx: RequestContext, req: P.SharedFpRequest, _: None) -> int:
    """Add to (or set) the shared file pointer in one transaction; its value before."""
    meta = _meta(ctx)
    try:
        return ctx.timed("meta", "keyval_write",
                         lambda: meta.shared_fp(req.handle, req.delta, bool(req.assign)), req.handle)
    except OverflowError as exc:
        raise RequestError(P.Status.EINVAL, str(exc)) from None


@action
def shared_fp_reply(ctx: RequestContext, req: P.SharedFpRequest, previous: int) -> P.Response:
    return req.reply(previous=previous)


# --------------------------------------------------------------------------- datafiles


@action
def trove_create(ctx: RequestContext, req: P.CreateDfileRequest, _: None) -> None:
    trove = ctx.state.trove
    ctx.timed("trove", "trove_create", lambda: trove.create(req.handle), req.handle)


@action
def trove_getattr(ctx: RequestContext, req: P.GetsizeRequest, _: None) -> int:
    _created(ctx, req.handle)
    trove = ctx.state.trove
    return ctx.timed("trove", "trove_getattr", lambda: trove.size(req.handle), req.handle)


@action
def trove_truncate(ctx: RequestContext, req: P.TruncateRequest, _: None) -> int:
    _created(ctx, req.handle)
    trove = ctx.state.trove
    ctx.timed("trove", "trove_truncate", lambda: trove.truncate(req.handle, req.size), req.handle, req.size)
    return req.size


@action
def size_reply(ctx: RequestContext, req: P.Request, size: int) -> P.Response:
    return req.reply(size=size)


@action
def trove_flush(ctx: RequestContext, req: P.FlushRequest, _: None) -> None:
    _created(ctx, req.handle)
    trove = ctx.state.trove
    ctx.timed("trove", "trove_flush", lambda: trove.flush(req.handle), req.handle)


@action
def trove_remove(ctx: RequestContext, req: P.RemoveDfileRequest, _: None) -> None:
    trove = ctx.state.trove
    ctx.timed("trove", "trove_remove", lambda: trove.remove(req.handle), req.handle)


@action
def empty_reply(ctx: RequestContext, req: P.Request, _: None) -> P.Response:
    return req.reply()


@action
def ping_reply(ctx: RequestContext, req: P.PingRequest, _: None) -> P.Response:
    return req.reply(server=ctx.state.name)


# --------------------------------------------------------------------------- the event log


@action
def log_flush(ctx: RequestContext, req: P.LogFlushRequest, _: None) -> P.Response:
    log = ctx.state.events.log
    log.flush()
    parts = log.parts()
    return req.reply(names=[p.name for p in parts], sizes=[p.stat().st_size for p in parts])


def _log_part(ctx: RequestContext, name: str) -> Path:
    """The part of the server's event log named ``name``; ENOENT for any other name."""
    log = ctx.state.events.log
    path = log.directory / name
    if not is_part(name, log.stem) or not path.is_file():
        raise RequestError(P.Status.ENOENT, f"no part {name!r} in the event log")
    return path


@action
def log_read(ctx: RequestContext, req: P.LogReadRequest, _: None) -> P.Response:
    with open(_log_part(ctx, req.name), "rb") as f:
        f.seek(req.offset)
        return req.reply(data=f.read(P.LOG_CHUNK))


@action
def log_remove(ctx: RequestContext, req: P.LogRemoveRequest, _: None) -> P.Response:
    _log_part(ctx, req.name).unlink()
    return req.reply()


@action
def event_mask(ctx: RequestContext, req: P.EventMaskRequest, _: None) -> P.Response:
    """Set the layers the server logs (unless the request only asks them); say them, in order."""
    events = ctx.state.events
    if not req.query:
        events.set_layers(frozenset(req.layers), ctx.who, now())
    return req.reply(layers=[layer for layer in SERVER_LAYERS if layer in events.layers])


# --------------------------------------------------------------------------- the table, compiled


def _compile() -> dict[tuple[int, int | None], Machine]:
    """Each request's machine, by (op, I/O type or None).  Every request must have its
    machine and every state its action (KeyError), every machine and action must serve
    a request (LookupError)."""
    by_request: dict[tuple[int, int | None], Machine] = {}
    for op, cls in P.REQUESTS.items():
        kinds = [(t, f"{cls.NAME}_{t.name.lower()}") for t in P.IoType] if issubclass(cls, P.IoRequest) \
            else [(None, cls.NAME)]
        for io_type, name in kinds:
            by_request[(op, io_type)] = Machine(name, tuple(_ACTIONS[s] for s in MACHINES[name]),
                                                name not in UNLOGGED)
    unused = set(MACHINES) - {m.name for m in by_request.values()}
    unused |= set(_ACTIONS) - {s for states in MACHINES.values() for s in states}
    if unused:
        raise LookupError(f"machines or actions that serve no request: {sorted(unused)}")
    return by_request


_MACHINES = _compile()
