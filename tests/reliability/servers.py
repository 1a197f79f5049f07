"""Real server processes for the reliability tests, and what the tests read of them (/proc)."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

from callid.mpiio.call import CallContext
from callid.run import RunOptions, ServerGroup, make_config
from callid_core.config import ServerConfig
from server_sim import bmi
from server_sim import protocol as P


def start(tmp: Path, servers: int = 1, **fields: Any) -> ServerGroup:
    """A file system of ``servers`` I/O servers and a metadata server (real processes, as ``callid
    run`` starts them) under ``tmp``, with the configuration's ``fields`` set (e.g. idle_timeout)."""
    group = ServerGroup(make_config(RunOptions(target=[], servers=servers), tmp), tmp / "fs.json",
                        tmp / "servers")
    for name, value in fields.items():
        if not hasattr(group.config, name):
            raise TypeError(f"the configuration has no field {name!r}")
        setattr(group.config, name, value)
    group.run_dir.mkdir(exist_ok=True)
    group.start()
    return group


def status(pid: int) -> dict[str, int]:
    """A process's peak and current resident memory (``VmHWM``, ``VmRSS``, kB) and its ``Threads``."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS", "Threads"):
            found[key] = int(value.split()[0])
    return found


def connect(group: ServerGroup, srv: ServerConfig) -> socket.socket:
    """A connection to ``srv`` that proved it holds the file system's secret."""
    return bmi.connect(srv.host, srv.port, timeout=10, secret=group.config.secret())


def ask(sock: socket.socket, tag: int, msg: P.Request, timeout: float = 10) -> P.Message:
    """Send a request; its answer."""
    bmi.send(sock, bmi.MODE_UNEXPECTED, tag, P.encode(msg))
    sock.settimeout(timeout)
    return P.decode(bmi.recv_expected(sock, tag))


def read_frame(sock: socket.socket, timeout: float) -> tuple[int, int, bytes] | None:
    """The next frame (mode, tag, payload), or None if the peer closed the connection."""
    sock.settimeout(timeout)
    head = bytearray()
    while len(head) < bmi.FRAME.size:
        got = sock.recv(bmi.FRAME.size - len(head))
        if not got:
            return None
        head += got
    _, mode, tag, size = bmi.FRAME.unpack(head)
    return mode, tag, bytes(bmi.recv_payload(sock, size))


def call(callid: int, func: str = "MPI_File_write_at") -> CallContext:
    return CallContext((callid,), func)


def wait_until(predicate, timeout: float, step: float = 0.05) -> bool:
    """Whether ``predicate()`` became true within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True
