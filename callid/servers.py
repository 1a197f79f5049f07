"""A file system's servers on any host: where ``callid fs init`` puts them, and the processes of
``callid servers start``, ``stop`` and ``status`` on this host (``callid.run`` starts them).

Each server has a directory of its own on its host (``ServerConfig.home``):

* ``storage/``: its datafiles and metadata;
* ``parts/``: its event log, as part files (``callid run --fs`` takes the parts of a run over the
  wire: ``callid.server_wire.log_parts``);
* ``NAME.addr``: its pid file: address, process id and host name (written by the server);
* ``NAME.log``: its output.

A process is taken for a server only when its address file names this machine and the process's
command line is that server's (``python -m server_sim serve ... --name NAME --addr-file FILE``),
so a stale pid file never gets a signal sent to another process.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from callid_core.config import DEFAULT_PORT, HOME_PARTS, META_SERVER, Config, ServerConfig, io_server
from callid_core.errors import BadValue, Failed

#: one server of ``callid fs init --servers``: HOST:NAME or HOST:PORT:NAME
_PLACEMENT = re.compile(rf"(?P<host>[^:\s,]+)(?::(?P<port>\d+))?:(?P<name>{META_SERVER}|io\d+)")
#: seconds a server has to stop (SIGTERM: it flushes its log) before it is killed
STOP_TIMEOUT = 20.0


@dataclass(frozen=True)
class Placement:
    """Where one server listens."""

    host: str
    port: int
    name: str


def parse_servers(spec: str, first_port: int = DEFAULT_PORT) -> list[Placement]:
    """``HOST[:PORT]:NAME,...`` -> where each server listens: ``meta0`` first (on the first host
    when it is not named), then ``io0`` ... ``io{N-1}``.  A port not given is the first one from
    ``first_port`` up that no other server of its host has.  :class:`BadValue` names the item at fault."""
    items = [s.strip() for s in spec.split(",") if s.strip()]
    if not items:
        raise BadValue("--servers: no server given (e.g. node1:io0,node2:io1)")
    given = _given(items)
    io = _io_names(given)
    given.setdefault(META_SERVER, (given[next(iter(given))][0], None))
    placed = _with_ports(given, [META_SERVER, *io], first_port)
    _check_distinct(placed)
    return placed


def _given(items: list[str]) -> dict[str, tuple[str, int | None]]:
    """Each server named in ``items`` (``HOST[:PORT]:NAME``): its host and port (None: not given)."""
    given: dict[str, tuple[str, int | None]] = {}
    for item in items:
        m = _PLACEMENT.fullmatch(item)
        if not m:
            raise BadValue(f"--servers: {item!r} is not HOST:NAME or HOST:PORT:NAME, with NAME meta0 "
                           f"or ioN (e.g. node1:io0 or 10.0.0.2:3334:io0)")
        port = int(m["port"]) if m["port"] else None
        if port is not None and not 0 < port < 65536:
            raise BadValue(f"--servers: {item}: port {port} is not between 1 and 65535")
        if m["name"] in given:
            raise BadValue(f"--servers: {m['name']} is placed twice")
        given[m["name"]] = (m["host"], port)
    return given


def _io_names(given: dict[str, tuple[str, int | None]]) -> list[str]:
    """The I/O servers named, ``io0`` to ``io{N-1}`` each once (else :class:`BadValue`)."""
    io = sorted((n for n in given if n.startswith("io")), key=lambda n: int(n[2:]))
    if not io:
        raise BadValue("--servers: no I/O server given (io0, io1, ...)")
    for i, name in enumerate(io):
        if name != io_server(i):
            raise BadValue(f"--servers: no {io_server(i)}: the I/O servers are {io_server(0)} to "
                           f"{io_server(len(io) - 1)}, each once")
    return io


def _with_ports(given: dict[str, tuple[str, int | None]], order: list[str],
                first_port: int) -> list[Placement]:
    """The servers in ``order``, each without a port given on the first from ``first_port`` up that
    no other server of its host has."""
    used = {(host, port) for host, port in given.values() if port is not None}
    placed = []
    for name in order:
        host, port = given[name]
        if port is None:
            port = first_port
            while (host, port) in used:
                port += 1
            used.add((host, port))
        placed.append(Placement(host, port, name))
    return placed


def _check_distinct(placed: list[Placement]) -> None:
    """:class:`BadValue` if two servers have one address."""
    seen: dict[tuple[str, int], str] = {}
    for p in placed:
        if (p.host, p.port) in seen:
            raise BadValue(f"--servers: {seen[p.host, p.port]} and {p.name} both at {p.host}:{p.port}")
        seen[p.host, p.port] = p.name


def place(config: Config, placements: list[Placement], server_dir: Path) -> None:
    """Put each server of ``config`` (named as ``placements`` name them) where they say, with its
    own directory ``server_dir/NAME`` (on its host)."""
    where = {p.name: p for p in placements}
    for srv in config.servers:
        p = where[srv.name]
        home = server_dir.resolve() / srv.name
        srv.host, srv.port, srv.home, srv.storage = p.host, p.port, str(home), str(home / "storage")


def on_this_host(srv: ServerConfig) -> bool:
    """Can a server listen on ``srv``'s address here (in this network namespace)?"""
    try:
        with socket.create_server((srv.host, 0)):
            return True
    except OSError:  # (an address of another host, or a name that does not resolve)
        return False


def select(config: Config, names: list[str] | None) -> list[ServerConfig]:
    """The servers named (each must be in ``config``), else those with an address of this host."""
    if names:
        return [config.server(name) for name in names]
    here = [srv for srv in config.servers if on_this_host(srv)]
    if not here:
        hosts = ", ".join(sorted({srv.host for srv in config.servers}))
        raise Failed(f"no server of the file system has an address of this host (they are on {hosts}); "
                     "start them on their hosts, or name them with --name")
    return here


def addr_file(srv: ServerConfig) -> Path:
    """The server's pid file: its address, process id, host name and flush count."""
    return Path(srv.home) / f"{srv.name}.addr"


def log_file(srv: ServerConfig) -> Path:
    """What the server prints (started by ``callid servers start``)."""
    return Path(srv.home) / f"{srv.name}.log"


def _read_addr(srv: ServerConfig) -> dict | None:
    try:
        info = json.loads(addr_file(srv).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) and isinstance(info.get("pid"), int) else None


def _is_server(pid: int, srv: ServerConfig) -> bool:
    """Is process ``pid`` of this machine the server ``srv`` (by its command line)?"""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False  # (gone; a zombie's command line is empty too)

    def arg(flag: bytes) -> bytes | None:
        return args[args.index(flag) + 1] if flag in args[:-1] else None

    return (b"server_sim" in args and arg(b"--name") == srv.name.encode()
            and arg(b"--addr-file") == str(addr_file(srv)).encode())


def running_pid(srv: ServerConfig) -> int | None:
    """The process id of ``srv`` when it runs on this machine, else None."""
    info = _read_addr(srv)
    if info is None or info.get("hostname") != socket.gethostname() or not _is_server(info["pid"], srv):
        return None
    return info["pid"]


def process_state(srv: ServerConfig) -> str:
    """What the server's pid file says of its process, in a few words."""
    info = _read_addr(srv)
    if info is None:
        return "not running here" if srv.home else "not started by callid servers start"
    if info.get("hostname") != socket.gethostname():
        return f"process {info['pid']} on {info.get('hostname')}"
    pid = info["pid"]
    return f"process {pid}" if _is_server(pid, srv) else f"its process {pid} has ended"


def _not_running(srv: ServerConfig) -> str:
    return f"server {srv.name} ({srv.host}:{srv.port}) is not running on this machine ({process_state(srv)})"


def stop(servers: list[ServerConfig], timeout: float = STOP_TIMEOUT) -> tuple[list[str], list[str]]:
    """SIGTERM each server running on this machine (it flushes its log and ends), wait for them, kill
    those still running after ``timeout``; (what was stopped, what failed), one line each."""
    stopping, done, failures = [], [], []
    for srv in servers:
        pid = running_pid(srv)
        if pid is None:
            failures.append(_not_running(srv))
            continue
        os.kill(pid, signal.SIGTERM)
        stopping.append((srv, pid))
    deadline = time.monotonic() + timeout
    for srv, pid in stopping:
        while _is_server(pid, srv) and time.monotonic() < deadline:
            time.sleep(0.02)
        if _is_server(pid, srv):
            os.kill(pid, signal.SIGKILL)
            failures.append(f"server {srv.name} did not stop within {timeout:.0f} s and was killed "
                            f"(its last events are lost; see {log_file(srv)})")
        else:
            done.append(f"stopped {srv.name} ({srv.host}:{srv.port}, process {pid}); its log: "
                        f"{Path(srv.home) / HOME_PARTS}")
        addr_file(srv).unlink(missing_ok=True)
    return done, failures


def keep_earlier_log(config: Config, srv: ServerConfig) -> Path | None:
    """Before a server starts: the log parts an earlier start left in its directory move to
    ``parts.N`` (a new log starts at part 0 and would replace them); where they went, if anywhere."""
    parts = Path(config.trace_dir_of(srv))
    if not any(parts.glob("server-*.parquet")):
        return None
    n = 1
    while parts.with_name(f"{parts.name}.{n}").exists():
        n += 1
    return parts.rename(parts.with_name(f"{parts.name}.{n}"))
