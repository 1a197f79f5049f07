"""The client side of the simulated file system (PVFS2's "system interface").

Builds the requests of each operation, sends one request to every datafile that
holds bytes of an access (in parallel), runs the client half of the flows, and
reports every client->server exchange to the trace.  Every operation takes the
:class:`CallContext` of the MPI call(s) it serves, and every request carries its
CallIDs as a hint; nothing here is process-global.
"""

from __future__ import annotations

import functools
import itertools
import select
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from callid.mpiio.call import CallContext
from callid.mpiio.ownership import Item, Owners, owned_per_buffer, split_items, stream_bytes
from callid_core import clock
from callid_core.config import Config
from callid_core.errors import CallidError, Failed
from server_sim import bmi
from server_sim import protocol as P
from server_sim.distribution import SimpleStripe, flow_buffers

RpcHook = Callable[..., None]  # (callids, func, server, op, seq, t0, t1, t_recv, t_send, error)
#: (callid, func, phase, t0, t1, *, offset, size, nbytes, error): a phase of a collective call
PhaseHook = Callable[..., None]


def _no_phase(*args: Any, **kwargs: Any) -> None:
    pass


class FsError(Failed):
    """A file-system operation answered with an error status (or a server that cannot be reached:
    ``lost``, the file system failed, not the request)."""

    def __init__(self, status: int, message: str, lost: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.lost = lost

    @property
    def fs_failed(self) -> bool:
        """Did the file system fail (a server lost, its disk full), rather than the request?"""
        return self.lost or self.status == P.Status.ENOSPC


@dataclass(frozen=True)
class FileAttrs:
    """An open file's handle and layout, as the metadata server returned them."""

    path: str
    handle: int
    strip_size: int
    dfiles: tuple[tuple[str, int], ...]  # (server, datafile handle) for datafile 0..c-1
    created: bool = False  # (a create's) this request made the file: it is empty

    @functools.cached_property
    def dist(self) -> SimpleStripe:
        return SimpleStripe(self.strip_size, len(self.dfiles))

    @classmethod
    def from_response(cls, path: str, resp: P.AttrResponse) -> FileAttrs:
        return cls(path, resp.handle, resp.strip_size, tuple(zip(resp.dfile_servers, resp.dfile_handles)),
                   bool(resp.created))


class _Connection:
    """One BMI connection to one server, authenticated (it proved it holds the file system's
    secret), used by one exchange at a time."""

    def __init__(self, host: str, port: int, secret: bytes) -> None:
        self.sock = bmi.connect(host, port, secret=secret)
        self.lock = threading.Lock()

    def request(self, tag: int, msg: P.Request) -> None:
        bmi.send(self.sock, bmi.MODE_UNEXPECTED, tag, P.encode(msg))

    def response(self, tag: int, req: P.Request, size: int = 64,
                 expect: type[P.Response] | None = None) -> P.Response:
        """The answer to ``req`` (its ``expect``, default its reply, or an error), with ``tag``
        (``size``: its usual encoded size, see bmi.recv_expected)."""
        return P.decode_reply(bmi.recv_expected(self.sock, tag, size), req, expect)


#: An exchange in steps, driven by :meth:`SysInt._parallel` so that one thread talks to
#: several servers at once (no thread hand-offs).  It yields ``WAIT`` where its next step
#: reads from its server and may send again after that, ``DRAIN`` where its next step only
#: reads (to its end: it can block without holding up what the other servers wait for),
#: ``MORE`` where it can go on sending at once.
WAIT, MORE, DRAIN = None, "more", "drain"
Steps = Generator[str | None, None, Any]
Body = Callable[[_Connection, int], Steps]


@dataclass(eq=False)
class _Job:
    """One server's exchanges in a drive."""

    first: int  # index of its first job (where its error is kept)
    steps: Steps
    fd: int  # its connection's socket
    state: str | None = MORE  # not started: it sends its request first


#: Encoded sizes of the responses an I/O exchange expects (each then arrives in one system call).
_ACK_SIZE = len(P.encode(P.IoResponse()))
_DONE_SIZE = len(P.encode(P.WriteCompletion()))


class SysInt:
    """File-system client of one rank."""

    def __init__(self, config: Config, rank: int, on_rpc: RpcHook, on_phase: PhaseHook = _no_phase,
                 seq: Iterator[int] | None = None) -> None:
        """``seq``: the request ids (default its own; clients sending for one rank share theirs)."""
        self.config = config
        self.rank = rank
        self.on_rpc = on_rpc
        self.on_phase = on_phase  # (the trace of the phases of the collective calls made through this client)
        self.stamp = config.callid
        self.small_io_limit = min(config.small_io, P.SMALL_IO_MAX_DATA)
        # What the I/O requests say they move (the file system's payload: its servers refuse another);
        # NONE: no data travels, a read leaves the caller's buffer as it was
        self.payload = P.payload_code(config.payload)
        self.carries_data = self.payload == P.PayloadCode.FULL
        self._seq = itertools.count(1) if seq is None else seq
        self._conns: dict[str, _Connection] = {}
        self._used: dict[str, float] = {}  # when an exchange last took each server's connection (monotonic s)
        self._conn_lock = threading.Lock()
        self._secret: bytes | None = None  # (read from the configuration's secret file when first needed)
        # A server closes a connection idle for config.idle_timeout: one idle for half of that is
        # replaced before it is used again.
        self._stale = config.idle_timeout / 2

    def close(self) -> None:
        with self._conn_lock:
            for conn in self._conns.values():
                conn.sock.close()
            self._conns.clear()

    def connect(self) -> None:
        """Connect to every server now (its start-up, before the program's first call, rather than
        inside the call that first reaches each server); one that cannot be reached is tried again
        when a call needs it, and that call says why."""
        for server in self.config.servers:
            try:
                self._conn(server.name)
            except FsError:
                pass

    # -- plumbing -----------------------------------------------------------------
    def _conn(self, server: str) -> _Connection:
        """The connection to ``server`` for an exchange starting now (a new one if there is none,
        or if the one there may be near the server's idle timeout)."""
        with self._conn_lock:
            conn = self._conns.get(server)
            now = time.monotonic()
            if conn is not None and now - self._used.get(server, now) > self._stale:
                del self._conns[server]
                if conn.lock.acquire(blocking=False):  # (else an exchange still uses it: it ends with it)
                    conn.sock.close()
                    conn.lock.release()
                conn = None
            if conn is None:
                cfg = self.config.server(server)
                if self._secret is None:
                    try:
                        self._secret = self.config.secret()
                    except CallidError as exc:  # (no secret to prove)
                        raise FsError(P.Status.EACCES, f"cannot connect to server {server}: {exc}") from None
                try:
                    conn = _Connection(cfg.host, cfg.port, self._secret)
                except OSError as exc:
                    raise FsError(P.Status.EIO, f"cannot reach server {server} at "
                                                f"{cfg.host}:{cfg.port}: {exc}", lost=True) from None
                self._conns[server] = conn
            self._used[server] = now
            return conn

    def _hints(self, call: CallContext, seq: int, callid_bytes: list[int] | None = None) -> dict:
        hints: dict = {"rank": self.rank, "request_id": seq}
        if self.stamp:
            hints["callid"] = list(call.callids)
            if callid_bytes:
                hints["callid_bytes"] = callid_bytes
        return hints

    def _exchange(self, server: str, msg: P.Request, call: CallContext) -> P.Response:
        """One exchange with one server, run to its end."""
        return self._parallel([(server, self._steps(server, msg, call))])[0]

    def _steps(self, server: str, msg: P.Request, call: CallContext,
               body: Body | None = None, callid_bytes: list[int] | None = None) -> Steps:
        """Send ``msg`` to ``server``, run ``body`` (default: wait for one response), log the rpc.

        Runs under :meth:`_parallel`, which holds the connection's lock."""
        seq = next(self._seq)
        msg.hints = self._hints(call, seq, callid_bytes)
        op = msg.NAME
        conn = self._conns[server]
        t0 = clock.now()
        resp: P.Response | None = None
        error = None
        try:
            try:
                conn.request(seq, msg)
                if body is None:
                    yield
                    resp = conn.response(seq, msg)
                else:
                    resp = yield from body(conn, seq)
            except (OSError, bmi.BmiError, P.ProtocolError) as exc:
                self._drop(server)
                raise FsError(P.Status.EIO, f"server {server}: {exc}", lost=True) from None
            if isinstance(resp, P.ErrorResponse):
                error = P.status_name(resp.status)
                raise FsError(resp.status, f"server {server}: {op} failed with {error}")
            return resp
        except FsError as exc:
            error = error or str(exc)
            raise
        finally:
            self.on_rpc(call.callids, call.func, server, op, seq, t0, clock.now(),
                        resp.t_recv if resp else None, resp.t_send if resp else None, error)

    def _drop(self, server: str) -> None:
        with self._conn_lock:
            conn = self._conns.pop(server, None)
        if conn is not None:
            conn.sock.close()

    def _parallel(self, jobs: list[tuple[str, Steps]]) -> list:
        """Drive ``(server, steps)`` jobs in this thread; return their results in order.

        In each round the jobs that can go on sending or only drain, and the waiting jobs
        whose server has answered take one step each, in order; when every job waits, the
        round waits for the first answer (poll).  Each server's connection is locked
        for the whole drive, in name order (so two threads never deadlock); its jobs run
        one after the other.  Every job runs to its end even when another fails; then
        the first failure is raised.
        """
        results: list = [None] * len(jobs)
        errors: list[BaseException | None] = [None] * len(jobs)
        by_server: dict[str, list[int]] = {}
        for i, (server, _) in enumerate(jobs):
            by_server.setdefault(server, []).append(i)
        held: list[_Connection] = []
        active: list[_Job] = []
        poller = select.poll()  # every active job's socket
        try:
            for server in sorted(by_server):
                job = self._server_job(server, jobs, by_server[server], results, errors, held)
                if job is not None:
                    active.append(job)
                    poller.register(job.fd, select.POLLIN)
            while active:
                for job in _ready(active, poller):
                    if _step(job, results, errors):
                        active.remove(job)
                        poller.unregister(job.fd)
        finally:
            for conn in reversed(held):
                conn.lock.release()
        for error in errors:
            if error is not None:
                raise error
        return results

    def _server_job(self, server: str, jobs: list[tuple[str, Steps]], mine: list[int], results: list,
                    errors: list[BaseException | None], held: list[_Connection]) -> _Job | None:
        """Lock ``server``'s connection (into ``held``) for its jobs ``mine``, run one after the other;
        None, their errors set, when it cannot be had."""
        try:
            conn = self._conn(server)
        except FsError as exc:
            for i in mine:
                jobs[i][1].close()
                errors[i] = exc
            return None
        conn.lock.acquire()
        held.append(conn)
        steps = jobs[mine[0]][1] if len(mine) == 1 else _chain(jobs, mine, results)
        return _Job(mine[0], steps, conn.sock.fileno())

    # -- metadata -----------------------------------------------------------------
    def lookup(self, path: str, call: CallContext) -> FileAttrs:
        resp = self._exchange(self.config.meta_server.name, P.LookupRequest(path=path), call)
        return FileAttrs.from_response(path, resp)

    def create(self, path: str, call: CallContext, *, dfile_count: int = 0,
               strip_size: int = 0, exclusive: bool = False) -> FileAttrs:
        """Create ``path`` (or find it, if it exists and the create is not exclusive); the datafiles of a
        file this call made are created on their I/O servers, as PVFS2's client does."""
        msg = P.CreateRequest(path=path, dfile_count=dfile_count, strip_size=strip_size,
                              exclusive=int(exclusive))
        resp = self._exchange(self.config.meta_server.name, msg, call)
        attrs = FileAttrs.from_response(path, resp)
        if resp.created:
            self._parallel([(s, self._steps(s, P.CreateDfileRequest(handle=h), call))
                            for s, h in attrs.dfiles])
        return attrs

    def remove(self, path: str, call: CallContext) -> None:
        resp = self._exchange(self.config.meta_server.name, P.RemoveRequest(path=path), call)
        attrs = FileAttrs.from_response(path, resp)
        self._parallel([(s, self._steps(s, P.RemoveDfileRequest(handle=h), call))
                        for s, h in attrs.dfiles])

    def dfile_sizes(self, f: FileAttrs, call: CallContext, only: set[int] | None = None) -> dict[int, int]:
        """Sizes of the datafiles (all, or those numbered in ``only``)."""
        nrs = [n for n in range(len(f.dfiles)) if only is None or n in only]
        resps = self._parallel([(f.dfiles[n][0], self._steps(f.dfiles[n][0], P.GetsizeRequest(
            handle=f.dfiles[n][1]), call)) for n in nrs])
        return {n: r.size for n, r in zip(nrs, resps)}

    def getsize(self, f: FileAttrs, call: CallContext) -> int:
        """Logical file size, from every datafile's size."""
        return _logical_size(f.dist, self.dfile_sizes(f, call))

    def truncate(self, f: FileAttrs, size: int, call: CallContext) -> None:
        dist = f.dist
        self._parallel([(s, self._steps(s, P.TruncateRequest(handle=h, size=dist.physical_start(n, size)),
                                         call)) for n, (s, h) in enumerate(f.dfiles)])

    def flush(self, f: FileAttrs, call: CallContext) -> None:
        self._parallel([(s, self._steps(s, P.FlushRequest(handle=h), call)) for s, h in f.dfiles])

    def shared_fp(self, f: FileAttrs, delta: int, call: CallContext, assign: bool = False) -> int:
        """Fetch-and-add (or set) the file's shared file pointer on the metadata server."""
        msg = P.SharedFpRequest(handle=f.handle, delta=delta, assign=int(assign))
        return self._exchange(self.config.meta_server.name, msg, call).previous

    # -- data -----------------------------------------------------------------------
    def io(self, f: FileAttrs, io_type: P.IoType, regions: Sequence[tuple[int, int]],
           stream: memoryview, call: CallContext) -> int:
        """Move ``stream`` to/from the file ``regions`` (list I/O); return the bytes transferred
        (on a payload-free file system only their sizes travel: ``stream`` is neither read nor written).

        One request goes to every datafile holding bytes of the access, with at most
        ``MAX_IO_REGIONS`` regions and ``config.max_flow`` bytes each (more: more requests, same
        CallIDs).
        A request serving several CallIDs says whose bytes each of its disk operations moves
        (the ``callid_bytes`` hint, from the call's ``owners``; no owners: every byte is every
        call's), and so does a request of one call given its owners (its bytes do not fill the
        access: the servers count the rest as holes); where that would make it too large it is split
        into several.
        """
        if stream.nbytes == 0:
            return 0
        owners = self._owners(call)
        if stream.format != "B" or stream.ndim != 1:  # (the flows send and receive byte views)
            stream = stream.cast("B")
        plan, shares = _plan(f.dist, regions)
        # Small I/O only when every datafile's share fits in one request, as in PVFS2.
        small = max(shares.values()) <= self.small_io_limit and all(
            len(items) <= P.MAX_IO_REGIONS for items in plan.values())
        jobs = [(f.dfiles[n][0], self._io_dfile(f, n, io_type, items, stream, call, small, owners,
                                                shares[n] > self.config.max_flow))
                for n, items in plan.items()]
        sizes = dict(zip(plan, self._parallel(jobs)))
        if io_type == P.IoType.WRITE:
            return stream.nbytes
        return _bytes_before(regions, self._read_end(f, regions, sizes, call))

    def _owners(self, call: CallContext) -> Owners | bool | None:
        """Whose bytes are where, for a request to say (see :meth:`_io_dfile`)."""
        if self.stamp and call.known and (len(call.callids) > 1 or call.owners):
            return Owners(call.owners) if call.owners else False
        return None

    def _read_end(self, f: FileAttrs, regions: Sequence[tuple[int, int]], sizes: dict[int, int],
                  call: CallContext) -> int:
        """The logical end of file for a read: the touched datafiles' ``sizes`` bound it from below;
        ask the others only when the access reaches past it."""
        eof = _logical_size(f.dist, sizes)
        last = max(off + n for off, n in regions)
        if eof < last and len(sizes) < len(f.dfiles):
            others = self.dfile_sizes(f, call, set(range(len(f.dfiles))) - set(sizes))
            eof = max(eof, _logical_size(f.dist, others))
        return eof

    def _io_dfile(self, f: FileAttrs, n: int, io_type: P.IoType, items: list[Item], stream: memoryview,
                  call: CallContext, small: bool, owners: Owners | bool | None, big: bool) -> Steps:
        """All requests to one datafile: the steps returning its size before the access (reads use it).

        ``owners``: the owners of the bytes of an access serving several CallIDs (False: every
        byte is every call's; None: one CallID, nothing to say); ``big``: the datafile's share is
        more than a request may move (``config.max_flow``)."""
        chunks = [items[i:i + P.MAX_IO_REGIONS] for i in range(0, len(items), P.MAX_IO_REGIONS)]
        if big:
            chunks = [part for chunk in chunks for part in self._flows(chunk)]
        if owners is None:
            planned = [(chunk, small, None) for chunk in chunks]
        else:
            planned = [one for chunk in chunks
                       for one in self._owned(f, n, io_type, chunk, call, small, owners)]
        requests = [self._io_one(f, n, io_type, [region for region, _, _ in chunk], stream, _pieces(chunk),
                                 call, is_small, hint) for chunk, is_small, hint in planned]
        return requests[0] if len(requests) == 1 else _largest(requests)

    def _flows(self, items: list[Item]) -> list[list[Item]]:
        """``items`` cut into requests of at most ``config.max_flow`` bytes each."""
        out = []
        while stream_bytes(items) > self.config.max_flow:
            left, items = split_items(items, self.config.max_flow)
            out.append(left)
        return [*out, items]

    def _owned(self, f: FileAttrs, n: int, io_type: P.IoType, items: list[Item], call: CallContext,
               small: bool, owners: Owners | bool) -> list[tuple[list[Item], bool, list[int] | None]]:
        """The requests carrying ``items`` to datafile ``n``, each with its ``callid_bytes`` hint:
        ``(items, small, hint)``.  Every request fits the unexpected-message limit: a small I/O
        that would not becomes a flow, a flow that would not is split in two where a flow
        buffer ends (its operations stay whole), until each fits.  Only a request of one byte
        that still does not fit goes without the hint (then its server attributes it at request
        level and says so)."""
        nbytes = stream_bytes(items)
        entries = owned_per_buffer(items, owners or None, len(call.callids),
                                   nbytes if small else self.config.flow_buffer)
        hint = P.encode_callid_bytes(entries)
        msg = (P.SmallIoRequest if small else P.IoRequest)(
            handle=f.dfiles[n][1], io_type=io_type, strip_size=f.strip_size, dfile_nr=n,
            dfile_count=len(f.dfiles), regions=[region for region, _, _ in items], payload=self.payload)
        msg.hints = self._hints(call, 0, hint)
        # (a small I/O's data adds its bytes and at most 8 of padding to the encoded request; counted
        # whatever the payload, so that a payload-free run plans the requests of one with data)
        if len(P.encode(msg)) + (nbytes + 8 if small else 0) <= bmi.UNEXPECTED_LIMIT:
            return [(items, small, hint)]
        if small:
            return self._owned(f, n, io_type, items, call, False, owners)
        if nbytes < 2:
            return [(items, False, None)]
        buffers = -(-nbytes // self.config.flow_buffer)
        cut = buffers // 2 * self.config.flow_buffer if buffers > 1 else nbytes // 2
        left, right = split_items(items, cut)
        return [*self._owned(f, n, io_type, left, call, False, owners),
                *self._owned(f, n, io_type, right, call, False, owners)]

    def _io_one(self, f: FileAttrs, n: int, io_type: P.IoType, regions: list[tuple[int, int]],
                view: memoryview, pieces: tuple[tuple[int, int], ...], call: CallContext, small: bool,
                callid_bytes: list[int] | None) -> Steps:
        """One request to datafile ``n``; return the datafile's size before the access.

        Yields after sending the request and after each flow buffer, so the requests and
        buffers of every datafile of an access interleave."""
        server, handle = f.dfiles[n]
        common = dict(handle=handle, io_type=io_type, strip_size=f.strip_size, dfile_nr=n,
                      dfile_count=len(f.dfiles), regions=regions, payload=self.payload)
        if small:
            data = b""
            if io_type == P.IoType.WRITE:
                data = view[pieces[0][0]:sum(pieces[0])] if len(pieces) == 1 else \
                    b"".join(view[o:o + k] for o, k in pieces)
            msg = P.SmallIoRequest(data=data, **common)
            msg.hints = self._hints(call, 0, callid_bytes)
            # SMALL_IO_MAX_DATA leaves 1 KiB for the header, the fixed fields (about 220 bytes) and
            # list values (16 bytes each at most): encode to check only when there are many.  (A
            # request with callid_bytes was checked when planned: it fits.)
            values = 2 * len(regions) + len(call.callids)
            if callid_bytes or values <= 48 or len(P.encode(msg)) <= bmi.UNEXPECTED_LIMIT:  # else: a flow
                if not self.carries_data:  # (checked with the data, as a run with data decides)
                    msg.data = b""
                resp = yield from self._steps(server, msg, call, callid_bytes=callid_bytes)
                if io_type == P.IoType.READ and self.carries_data:
                    _scatter(resp.data, view, pieces)
                return resp.bstream_size

        msg = P.IoRequest(**common)

        def flow(conn: _Connection, tag: int) -> Steps:
            if io_type == P.IoType.READ:
                yield DRAIN
                # The ack and every buffer straight into place, in as few system calls as the
                # kernel allows: the buffers are cut as the servers cut them (the flow buffer
                # size is the file system's, from the shared configuration).
                raw = memoryview(bytearray(_ACK_SIZE))
                messages = [[raw]]
                if self.carries_data:  # (payload none: the ack alone arrives)
                    messages += ([view[o:o + k] for o, k in buf]
                                 for buf, _ in flow_buffers(pieces, self.config.flow_buffer))
                got = bmi.recv_messages_into(conn.sock, tag, messages, short_first=True)
                ack = P.decode_reply(raw[:got], msg)
                if not isinstance(ack, P.ErrorResponse):
                    self._check_buffers(ack)
                return ack
            yield WAIT
            ack = conn.response(tag, msg, _ACK_SIZE)
            if isinstance(ack, P.ErrorResponse):
                return ack
            self._check_buffers(ack)  # (callid_bytes says whose each buffer is: cut as it was planned)
            # The buffers leave in batches of up to bmi.FLOW_BATCH bytes, one system call each
            # where the socket takes them (the server receives a batch at once too); none without data.
            buffers = flow_buffers(pieces, ack.buffer_size) if self.carries_data else []
            per_batch = max(1, bmi.FLOW_BATCH // ack.buffer_size)
            out: list[memoryview] = []
            for i, (buf, _) in enumerate(buffers, 1):
                out += bmi.frame(bmi.MODE_EXPECTED, tag, *[view[o:o + k] for o, k in buf])
                if i % per_batch == 0 or i == len(buffers):
                    bmi.send_buffers(conn.sock, out)
                    out = []
                    yield MORE if i < len(buffers) else WAIT
            if not buffers:
                yield WAIT
            done = conn.response(tag, msg, _DONE_SIZE, msg.COMPLETION)
            done.t_recv = ack.t_recv
            return done

        resp = yield from self._steps(server, msg, call, flow, callid_bytes)
        return getattr(resp, "bstream_size", 0)


    def _check_buffers(self, ack: P.IoResponse) -> None:
        """The server cuts flows in the flow buffers of the shared configuration, as this client does."""
        if ack.buffer_size != self.config.flow_buffer:
            raise P.ProtocolError(f"the server uses {ack.buffer_size}-byte flow buffers, "
                                  f"the configuration says {self.config.flow_buffer}")


def _pieces(items: list[Item]) -> tuple[tuple[int, int], ...]:
    """The stream pieces of a request's items, in order."""
    return items[0][1] if len(items) == 1 else tuple(p for _, pieces, _ in items for p in pieces)


def _largest(requests: list[Steps]) -> Steps:
    """Run one datafile's requests one after the other; return the largest size they return."""
    size = 0
    for steps in requests:
        size = max(size, (yield from steps))
    return size


def _chain(jobs: list[tuple[str, Steps]], indices: list[int], results: list) -> Steps:
    """Run the jobs ``indices`` (one server's) one after the other, storing their results;
    return the first job's (where the driver stores a job's result)."""
    for i in indices:
        results[i] = yield from jobs[i][1]
    return results[indices[0]]


def _logical_size(dist: SimpleStripe, sizes: dict[int, int]) -> int:
    return max((dist.logical_size(n, s) for n, s in sizes.items()), default=0)


def _plan(dist: SimpleStripe,
          regions: Sequence[tuple[int, int]]) -> tuple[dict[int, list[Item]], dict[int, int]]:
    """Per datafile: the regions touching it, each with its pieces of the stream; and its bytes."""
    plan: dict[int, list[Item]] = {}
    shares: dict[int, int] = {}
    pos = 0
    for off, length in regions:
        for n, pieces, nbytes in dist.stream_pieces(off, length):
            if pos:
                pieces = tuple((p + pos, k) for p, k in pieces)
            plan.setdefault(n, []).append(((off, length), pieces, pos))
            shares[n] = shares.get(n, 0) + nbytes
        pos += length
    return plan, shares


def _bytes_before(regions: Sequence[tuple[int, int]], eof: int) -> int:
    """Bytes read: the stream of ``regions`` up to the logical end of file ``eof``."""
    done = 0
    for off, n in regions:
        if off >= eof:
            break
        done += min(n, eof - off)
        if off + n > eof:
            break
    return done


def _ready(active: list[_Job], poller: select.poll) -> list[_Job]:
    """The jobs that take a step this round (``active`` itself when all of them do)."""
    waiting = sum(job.state is WAIT for job in active)
    if waiting > 1 or 0 < waiting < len(active):
        # the waiting jobs whose server has answered (when all wait: once one has)
        readable = {fd for fd, _ in poller.poll(None if waiting == len(active) else 0)}
        return [job for job in active if job.state is not WAIT or job.fd in readable]
    return active


def _step(job: _Job, results: list, errors: list[BaseException | None]) -> bool:
    """Take one step of ``job``; True when it has ended (its result or its error stored)."""
    try:
        job.state = next(job.steps)
        return False
    except StopIteration as stop:  # its result (a chain stores its later jobs' own)
        results[job.first] = stop.value
    except Exception as exc:  # noqa: BLE001 (re-raised by the driver, after the others end)
        errors[job.first] = exc
    return True


def _scatter(data: memoryview | bytes, view: memoryview, pieces: list[tuple[int, int]]) -> None:
    pos = 0
    for o, k in pieces:
        view[o:o + k] = data[pos:pos + k]
        pos += k
