"""The wire to a file system's running servers, on any host: a connection proving the file system's
secret, a ping, and a server's event log taken over it (its directory may be on a host this one cannot
see).  ``callid run`` pings the servers it starts and takes the logs of a run with ``--fs``;
``callid servers start`` and ``status`` ping them.  :mod:`callid.servers` finds and stops the server
processes of this host; ``callid.run`` starts them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from callid_core import schema as S
from callid_core.atomic import replacing
from callid_core.config import ServerConfig
from callid_core.errors import Failed
from callid_core.partlog import is_part
from server_sim import bmi
from server_sim import protocol as P

#: seconds a server has to answer a request for its event log
LOG_TIMEOUT = 30.0


class RunError(Failed):
    """A run that could not be done; the message says which rank or server failed (here: a server
    that does not answer, or refuses)."""


@contextmanager
def _connection(srv: ServerConfig, secret: bytes, timeout: float) -> Iterator[Callable[[P.Request], Any]]:
    """A connection to ``srv`` proving it holds the file system's ``secret`` (``Config.secret``), as
    a function that sends one request and returns its reply; :class:`RunError` naming the server if
    it does not answer, or answers with an error."""
    where = f"server {srv.name} at {srv.host}:{srv.port}"
    tags = itertools.count(1)
    try:
        sock = bmi.connect(srv.host, srv.port, timeout=timeout, secret=secret)
    except (OSError, P.ProtocolError) as exc:
        raise RunError(f"{where} does not answer: {exc}") from None

    def ask(req: P.Request) -> Any:
        tag = next(tags)
        try:
            bmi.send(sock, bmi.MODE_UNEXPECTED, tag, P.encode(req))
            resp = P.decode_reply(bmi.recv_expected(sock, tag), req)
        except (OSError, P.ProtocolError) as exc:
            raise RunError(f"{where} does not answer: {exc}") from None
        if isinstance(resp, P.ErrorResponse):
            raise RunError(f"{where} refused a {req.NAME} request ({P.status_name(resp.status)})")
        return resp

    try:
        sock.settimeout(timeout)
        yield ask
    finally:
        sock.close()


def ping(srv: ServerConfig, secret: bytes, timeout: float = 5.0) -> str:
    """Ask a server for its name, on a connection proving it holds the file system's ``secret``
    (``Config.secret``); raise :class:`RunError` if it does not answer."""
    with _connection(srv, secret, timeout) as ask:
        name = ask(P.PingRequest()).server
    if name != srv.name:
        raise RunError(f"server at {srv.host}:{srv.port} is not {srv.name}")
    return name


def event_mask(srv: ServerConfig, secret: bytes, layers: list[str] | None = None,
               timeout: float = 5.0) -> list[str]:
    """Set the layers a running server logs (None: only ask); the layers it logs now.  :class:`RunError`
    if it does not answer or refuses."""
    with _connection(srv, secret, timeout) as ask:
        return list(ask(P.EventMaskRequest(layers=layers or [], query=int(layers is None))).layers)


def log_parts(srv: ServerConfig, secret: bytes, timeout: float = LOG_TIMEOUT) -> dict[str, int]:
    """Ask a server to write the events it logged so far as a part file; its log's parts: their
    names and sizes.  :class:`RunError` if it does not answer."""
    with _connection(srv, secret, timeout) as ask:
        reply = ask(P.LogFlushRequest())
    stem = S.server_log_stem(srv.name)
    odd = [name for name in reply.names if not is_part(name, stem)]
    if odd:
        raise RunError(f"server {srv.name} at {srv.host}:{srv.port} named log parts that are not its own: "
                       f"{odd[:3]}")
    if len(reply.names) != len(reply.sizes):
        raise RunError(f"server {srv.name} at {srv.host}:{srv.port} named {len(reply.names)} log parts "
                       f"and {len(reply.sizes)} sizes")
    return dict(zip(reply.names, reply.sizes, strict=True))


def take_log_parts(srv: ServerConfig, secret: bytes, parts: dict[str, int], into: Path,
                   timeout: float = LOG_TIMEOUT) -> None:
    """Copy a server's log ``parts`` (names and sizes, as :func:`log_parts` gives them) into the
    directory ``into``, each under a temporary name until it is whole, and remove each from the server
    once copied.  :class:`RunError` if the server does not answer or a part ends early (the parts
    copied so far stay)."""
    with _connection(srv, secret, timeout) as ask:
        for name, size in sorted(parts.items()):
            with replacing(into / name) as tmp, open(tmp, "wb") as f:
                while (done := f.tell()) < size:
                    data = ask(P.LogReadRequest(name=name, offset=done)).data
                    if not data:
                        raise RunError(f"server {srv.name}: its log part {name} ended at byte {done} "
                                       f"of {size}")
                    f.write(data)
            ask(P.LogRemoveRequest(name=name))
