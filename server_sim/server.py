"""One server process: wires BMI, the request state machines, flows, Trove and the event log.

What one client can take is bounded by the configuration: at most ``max_connections``
connections at once, one thread each (beyond, a new connection is refused: its hello says
EAGAIN; when the process runs out of file descriptors, EMFILE, through a descriptor kept in
reserve for that); a connection proves it holds the file system's secret within
``AUTH_TIMEOUT`` seconds in all, however slowly its bytes come (``bmi.authenticate``; beyond
the first ten, refusals are logged one in a hundred), and is closed after ``idle_timeout``
seconds without a byte.  SIGTERM or SIGINT stops it: no new connection, every connection shut
down, their threads waited for at most ``SHUTDOWN_GRACE`` seconds, the event log flushed.  A
server that goes on serving writes its log when a client asks (``log_flush``: ``callid run
--fs`` takes it so).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import resource
import signal
import socket
import threading
import time
from dataclasses import replace

from callid_core import clock
from callid_core.atomic import replacing
from callid_core.config import ROLE_META, Config
from callid_core.devices import faults_from_json, model_from_json
from server_sim import bmi
from server_sim import protocol as P
from server_sim.context import RequestContext, ServerState, send_reply
from server_sim.devices import Pause, link_of, modelled
from server_sim.events import ServerEvents, now
from server_sim.requests import RequestError, machine_for, serve
from server_sim.trove import MetaStore, SizeTrove, Trove

log = logging.getLogger("server_sim.server")

#: Seconds a new connection has to prove it holds the secret (at most the idle timeout).
AUTH_TIMEOUT = 10.0
#: Seconds a stopping server waits for its connections' threads before it flushes its log.
SHUTDOWN_GRACE = 5.0
#: Exit status when even the flush does not end within twice the grace (the watchdog's).
EXIT_HUNG = 3
#: Exit status when the event log could not be flushed (a full disk): its last events are lost.
EXIT_LOG_LOST = 4
#: Listen backlog (connections the kernel holds before they are accepted).
BACKLOG = 256
#: File descriptors a server keeps for itself beside connections and open datafiles (the
#: listener, the one in reserve, log parts, the metadata store, Python's and pyarrow's own).
FD_RESERVE = 64


class Shutdown(Exception):
    """Raised in the main thread by the first SIGTERM/SIGINT."""


#: the requests of the run's management, not of the file system: a planted pause holds none of them
_ADMIN = frozenset({P.Op.PING, P.Op.LOG_FLUSH, P.Op.LOG_READ, P.Op.LOG_REMOVE, P.Op.EVENT_MASK})


def _descriptors(connections: int, open_files: int) -> tuple[int, int]:
    """How many connections and open datafiles the process's descriptors allow (the soft limit
    raised to the hard one if that is needed), so that serving never runs out of descriptors:
    a connection beyond is refused (EAGAIN) before one would be."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = connections + open_files + FD_RESERVE
    if soft != resource.RLIM_INFINITY and soft < need:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (need if hard == resource.RLIM_INFINITY else
                                                        min(need, hard), hard))
        except (ValueError, OSError):
            pass
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY or soft >= need:
        return connections, open_files
    room = max(2, soft - FD_RESERVE)
    open_files = min(open_files, room // 4)
    log.warning("%d file descriptors: at most %d connections and %d open datafiles", soft,
                room - open_files, open_files)
    return room - open_files, open_files


def _reserve() -> int | None:
    """A descriptor kept in reserve, freed to refuse a connection when the process has no other."""
    try:
        return os.open(os.devnull, os.O_RDONLY)
    except OSError:
        return None


class Server:
    """A PVFS2-like server: metadata and/or I/O roles, as named in the configuration."""

    def __init__(self, config: Config, name: str) -> None:
        self.config = config
        self.me = config.server(name)
        self.secret = config.secret()
        clock.use_domain(config.clock_skew, config.clock_t0, name)
        self.max_connections, open_files = _descriptors(config.max_connections, Trove.MAX_OPEN)
        self.events = ServerEvents(replace(config, trace_dir=config.trace_dir_of(self.me)), name)
        payload = P.payload_code(config.payload)  # (the file system's: never a client's)
        trove = (Trove if payload == P.PayloadCode.FULL else SizeTrove)(self.me.storage, open_files)
        meta = MetaStore(self.me.storage) if ROLE_META in self.me.roles else None
        fault = faults_from_json(config.faults).get(name)
        self.trove, self.meta = modelled(trove, meta, model_from_json(config.disk_model), fault)
        self.pause = Pause(*fault.pause) if fault and fault.pause else None
        self.state = ServerState(name, self.trove, self.meta, self.events, config.flow_buffer,
                                 tuple(s.name for s in config.io_servers), config.strip_size, config.max_flow,
                                 payload, link_of(model_from_json(config.net_model), fault))
        self._conns: dict[socket.socket, threading.Thread] = {}
        self._lock = threading.Lock()
        self._refused = 0  # connections refused (too many), and clients refused (no proof of the secret)
        self._denied = 0
        self._stopping = False

    # -- lifecycle ------------------------------------------------------------------
    def listen(self) -> socket.socket:
        """The listening socket, on the configuration's address (port 0: any free one); OSError
        if it cannot be had (an address of another host, a port in use)."""
        return socket.create_server((self.me.host, self.me.port), backlog=BACKLOG)

    def serve(self, addr_file: str | os.PathLike[str] | None = None,
              listener: socket.socket | None = None) -> bool:
        """Listen, write ``addr_file`` (its address and process id), serve until SIGTERM, then
        flush; whether the event log was flushed."""
        listener = listener or self.listen()
        host, port = listener.getsockname()[:2]
        addr = {"host": host, "port": port, "pid": os.getpid(), "hostname": socket.gethostname()}
        signal.signal(signal.SIGTERM, self._signal)
        signal.signal(signal.SIGINT, self._signal)
        if addr_file:  # (once the signals are handled: whoever reads it may send them)
            with replacing(addr_file) as tmp:
                tmp.write_text(json.dumps(addr))
        log.info("server %s listening on %s:%d", self.me.name, host, port)
        spare = _reserve()
        try:
            while True:
                try:
                    sock, peer = listener.accept()
                except OSError as exc:
                    spare = self._accept_failed(listener, exc, spare)
                    continue
                self._admit(sock, peer)
        except Shutdown:
            log.info("server %s shutting down", self.me.name)
        finally:
            listener.close()
            flushed = self.close()
        return flushed

    def _signal(self, signum: int, frame: object) -> None:
        """SIGTERM, SIGINT: stop (the first one only: a later one cannot cut the stop short)."""
        if self._stopping:
            log.info("signal %d: stopping already", signum)
            return
        self._stopping = True
        raise Shutdown

    def _accept_failed(self, listener: socket.socket, exc: OSError, spare: int | None) -> int | None:
        """Go on after ``accept`` failed; the descriptor in reserve after that."""
        if exc.errno in (errno.EMFILE, errno.ENFILE):
            # Out of descriptors: the one in reserve takes the waiting connection, to refuse it
            # (else it would wait in the backlog, and accept fail again at once).
            if spare is not None:
                os.close(spare)
            try:
                sock, peer = listener.accept()
            except OSError:
                time.sleep(0.05)  # (nothing in reserve: wait for connections to end)
            else:
                self._refuse(sock, peer, exc.errno, "out of file descriptors")
            return _reserve()
        if exc.errno in (errno.ENOBUFS, errno.ENOMEM):
            log.warning("accept failed: %s", exc)
            time.sleep(0.05)
        else:  # (a connection reset before it was accepted, ...)
            log.info("accept failed: %s", exc)
        return spare

    def _admit(self, sock: socket.socket, peer: tuple) -> None:
        """Serve a new connection in a thread of its own, or refuse it when the server is full."""
        with self._lock:
            n = len(self._conns)
        if n >= self.max_connections:
            self._refuse(sock, peer, errno.EAGAIN, f"{n} connections, the most allowed")
            return
        thread = threading.Thread(target=self._connection, args=(sock, peer), daemon=True,
                                  name=f"{self.me.name}-conn")
        with self._lock:
            self._conns[sock] = thread
        try:
            thread.start()
        except RuntimeError as exc:  # (no thread to be had)
            with self._lock:
                self._conns.pop(sock, None)
            self._refuse(sock, peer, errno.EAGAIN, str(exc))

    def _refuse(self, sock: socket.socket, peer: tuple, status: int, why: str) -> None:
        """Tell a new connection it is refused (``status``, an errno) and close it."""
        try:
            bmi.set_timeout(sock, 1.0)
            bmi.refuse(sock, status)
        except OSError:
            pass
        finally:
            sock.close()
        self._refused += 1
        if self._refused == 1 or self._refused % 100 == 0:
            log.warning("refused a connection from %s:%s: %s (%d refused so far)", peer[0], peer[1], why,
                        self._refused)

    def close(self) -> bool:
        """Stop the connections, let their work finish (at most ``SHUTDOWN_GRACE`` s) and flush
        the event log; whether it was flushed.  A watchdog ends the process if even that does not end."""
        watchdog = threading.Timer(2 * SHUTDOWN_GRACE, os._exit, (EXIT_HUNG,))
        watchdog.daemon = True
        watchdog.start()
        deadline = time.monotonic() + SHUTDOWN_GRACE
        with self._lock:
            conns = dict(self._conns)
        for sock in conns:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in conns.values():
            thread.join(max(0.0, deadline - time.monotonic()))
        busy = sum(thread.is_alive() for thread in conns.values())
        if busy:
            log.warning("%d connections still busy after %.0f s: their last events are lost", busy,
                        SHUTDOWN_GRACE)
        flushed = True
        try:
            self.events.close()
        except Exception:  # noqa: BLE001 (the rest still closes)
            log.exception("the event log could not be flushed")
            flushed = False
        if not busy:  # (else a busy thread may still use them: the process ends with them open)
            self.trove.close()
            if self.meta is not None:
                self.meta.close()
        watchdog.cancel()
        return flushed

    # -- one connection ------------------------------------------------------------------
    def _connection(self, sock: socket.socket, peer: tuple) -> None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            bmi.set_timeout(sock, 1.0)  # (its hello)
            try:
                bmi.authenticate(sock, self.secret, min(AUTH_TIMEOUT, self.config.idle_timeout))
            except bmi.Refused as exc:
                self._denied += 1
                if self._denied <= 10 or self._denied % 100 == 0:  # (a flood of them: one line in 100)
                    log.warning("refused the client at %s:%s: %s (%d refused so far)", peer[0], peer[1], exc,
                                self._denied)
                if exc.request is not None:
                    self._deny(sock, *exc.request)
                return
            bmi.set_timeout(sock, self.config.idle_timeout)
            while self._one_request(sock):
                pass
        except BlockingIOError:
            log.info("closed the connection from %s:%s: no bytes for %s s", peer[0], peer[1],
                     self.config.idle_timeout)
        except (bmi.BmiError, OSError) as exc:
            log.info("connection from %s:%s closed: %s", peer[0], peer[1], exc)
        except Exception:  # a server never dies on a bad request
            log.exception("connection failed")
        finally:
            with self._lock:
                self._conns.pop(sock, None)
            sock.close()

    @staticmethod
    def _deny(sock: socket.socket, tag: int, size: int) -> None:
        """Answer the request of a client that has not proved it holds the secret: EACCES."""
        if size <= bmi.UNEXPECTED_LIMIT:
            bmi.discard(sock, size)
            send_reply(sock, tag, P.ErrorResponse(P.Status.EACCES), now())

    def _one_request(self, sock: socket.socket) -> bool:
        """Serve one request on ``sock``; False when the peer closed the connection."""
        try:
            header = bmi.recv_header(sock)
        except bmi.MessageTooBig as exc:
            log.warning("rejected message: %s", exc)
            if exc.fatal:
                send_reply(sock, exc.tag, P.ErrorResponse(P.Status.EPROTO), 0)
                return False
            bmi.discard(sock, exc.size)
            send_reply(sock, exc.tag, P.ErrorResponse(P.Status.EMSGSIZE), 0)
            return True
        if header is None:
            return False
        mode, tag, size = header
        if mode != bmi.MODE_UNEXPECTED:  # (read and dropped as it arrives: nothing allocated for it)
            bmi.discard(sock, size)
            log.warning("dropped an expected message (tag %d) with no request waiting", tag)
            send_reply(sock, tag, P.ErrorResponse(P.Status.EPROTO), now())
            return True
        payload = bmi.recv_payload(sock, size)
        t_recv = now()
        req: P.Message | None = None
        try:
            req = P.decode(payload)
            machine = machine_for(req)
        except (P.ProtocolError, RequestError) as exc:
            log.warning("bad request: %s", exc)
            status = exc.status if isinstance(exc, RequestError) else P.Status.EPROTO
            op = req.OP if isinstance(req, P.Request) else 0
            send_reply(sock, tag, P.ErrorResponse(status, op=op), t_recv)
            return True
        if req.OP not in _ADMIN:
            if self.state.link is not None:  # (the request is served once it has crossed the link)
                self.state.link.inbound(bmi.FRAME.size + size)
                t_recv = now()
            if self.pause is not None:  # (a planted fault: the server stalls)
                self.pause.wait()
        ctx = RequestContext(self.state, sock, tag, t_recv, req, machine.name if machine.logged else None)
        reply = serve(ctx, req, machine)
        if reply is not None:
            ctx.send(reply)
        return True
