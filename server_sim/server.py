"""One server process: wires BMI, the request state machines, flows, Trove and the event log."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import threading

from callid_core import clock
from callid_core.atomic import replacing
from callid_core.config import ROLE_META, Config
from server_sim import bmi
from server_sim import protocol as P
from server_sim.context import RequestContext, ServerState, send_reply
from server_sim.events import ServerEvents, now
from server_sim.requests import RequestError, machine_for, serve
from server_sim.trove import MetaStore, Trove

log = logging.getLogger("server_sim.server")


class Shutdown(Exception):
    """Raised in the main thread by SIGTERM/SIGINT."""


def _raise_shutdown(signum, frame) -> None:
    raise Shutdown


class Server:
    """A PVFS2-like server: metadata and/or I/O roles, as named in the configuration."""

    def __init__(self, config: Config, name: str) -> None:
        self.config = config
        self.me = config.server(name)
        clock.use_domain(config.clock_skew, config.clock_t0, name)
        self.events = ServerEvents(config, name)
        self.trove = Trove(self.me.storage)
        self.meta = MetaStore(self.me.storage) if ROLE_META in self.me.roles else None
        self.state = ServerState(name, self.trove, self.meta, self.events, config.flow_buffer,
                                 tuple(s.name for s in config.io_servers), config.strip_size)
        self._conns: dict[socket.socket, threading.Thread] = {}
        self._lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------------
    def serve(self, addr_file: str | os.PathLike[str] | None = None) -> None:
        """Listen, write ``addr_file`` ({host, port, pid}), serve until SIGTERM, then flush."""
        listener = socket.create_server((self.me.host, self.me.port), backlog=256)
        host, port = listener.getsockname()[:2]
        if addr_file:
            with replacing(addr_file) as tmp:
                tmp.write_text(json.dumps({"host": host, "port": port, "pid": os.getpid()}))
        signal.signal(signal.SIGTERM, _raise_shutdown)
        signal.signal(signal.SIGINT, _raise_shutdown)
        log.info("server %s listening on %s:%d", self.me.name, host, port)
        try:
            while True:
                sock, peer = listener.accept()
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                thread = threading.Thread(target=self._connection, args=(sock,), daemon=True,
                                          name=f"{self.me.name}-conn")
                with self._lock:
                    self._conns[sock] = thread
                thread.start()
        except Shutdown:
            log.info("server %s shutting down", self.me.name)
        finally:
            listener.close()
            self.close()

    def close(self) -> None:
        """Stop connections, let their Trove work finish and flush the event log."""
        with self._lock:
            conns, self._conns = dict(self._conns), {}
        for sock in conns:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in conns.values():
            thread.join(timeout=10)
        self.events.close()
        self.trove.close()
        if self.meta is not None:
            self.meta.close()

    # -- one connection ------------------------------------------------------------------
    def _connection(self, sock: socket.socket) -> None:
        try:
            while self._one_request(sock):
                pass
        except (bmi.BmiError, OSError) as exc:
            log.info("connection closed: %s", exc)
        except Exception:  # a server never dies on a bad request
            log.exception("connection failed")
        finally:
            with self._lock:
                self._conns.pop(sock, None)
            sock.close()

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
        payload = bmi.recv_payload(sock, size)
        t_recv = now()
        if mode != bmi.MODE_UNEXPECTED:
            log.warning("dropped an expected message (tag %d) with no request waiting", tag)
            send_reply(sock, tag, P.ErrorResponse(P.Status.EPROTO), t_recv)
            return True
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
        ctx = RequestContext(self.state, sock, tag, t_recv, req, machine.name if machine.logged else None)
        reply = serve(ctx, req, machine)
        if reply is not None:
            ctx.send(reply)
        return True
