"""The file system's configuration file (the ``fs.conf``/``pvfs2tab`` of this system).

One JSON file names every server (address, roles, storage, clock) and the run
parameters the servers and the client wrappers share.  ``callid run`` writes it;
servers and ``callid.launch`` read it (``CALLID_CONFIG`` names it).

Every connection to a server proves that it holds the file system's secret (the handshake of
``server_sim.bmi``).  The secret is kept in a file of its own, readable by its owner only
(:func:`new_secret`, :meth:`Config.secret`); the configuration names that file, never the
secret, so the secret reaches neither the logs nor the run's metadata.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path

from callid_core.atomic import replacing, temporary
from callid_core.choices import SERVER_LAYERS, MpiIo, Payload
from callid_core.errors import InputError
from callid_core.ids import DEFAULT_LAYOUT

#: environment variable naming the configuration file (read by ``callid.launch``)
CONFIG_ENV = "CALLID_CONFIG"
ROLE_META = "meta"
ROLE_IO = "io"
#: the metadata server's name; the I/O servers are io0, io1, ... (:func:`io_server`)
META_SERVER = "meta0"

# The defaults of a file system, in one place (``callid run``, the CLI and the servers read them).
#: simple_stripe strip size in bytes (PVFS2's default)
DEFAULT_STRIP_SIZE = 65536
#: bytes per flow buffer (PVFS2's default is 256 KiB; 64 KiB shows more of a flow)
DEFAULT_FLOW_BUFFER = 65536
#: largest share of one access per server that travels inside the request (0: no small I/O)
DEFAULT_SMALL_IO = 16384
#: path prefix under which files live on the simulated file system
DEFAULT_MOUNT = "/pvfs2"
#: rows of a log's part file (a log writes its rows when it has this many, and by time)
DEFAULT_FLUSH_ROWS = 4096
#: seconds a logged row waits at most before it is written (what a killed process can lose)
DEFAULT_FLUSH_SECONDS = 1.0
#: I/O servers of a run (plus one metadata server)
DEFAULT_IO_SERVERS = 2
#: MPI ranks of a run
DEFAULT_RANKS = 2
#: bytes an aggregator of two-phase collective buffering accesses per cycle (the hint ``cb_buffer_size``)
DEFAULT_CB_BUFFER_SIZE = 16 * 1024 * 1024
#: calls in flight per replayer process (callid replay --lanes 0): one per source rank it drives, at most this
MAX_REPLAY_LANES = 32
#: most bytes one I/O request moves on one datafile (a server answers E2BIG beyond)
DEFAULT_MAX_FLOW = 1 << 30
#: most connections a server serves at once (one thread each; beyond, new ones are refused)
DEFAULT_MAX_CONNECTIONS = 256
#: the longest --timeout of a run (seconds: 30 days)
MAX_TIMEOUT = 30 * 24 * 3600.0
#: ``callid sql --timeout``: a query still running after this long is stopped
DEFAULT_SQL_TIMEOUT = "1h"
#: seconds a server waits for the next bytes of a connection before it closes it
DEFAULT_IDLE_TIMEOUT = 300.0
#: bytes of a file system's secret
SECRET_BYTES = 32
#: the secret's file, next to the configuration file (``callid run``: ``OUT/fs.secret``)
SECRET_FILE = "fs.secret"
#: first TCP port of the servers on one host (PVFS2's; ``callid fs init``: the next ones follow)
DEFAULT_PORT = 3334
#: a server's log parts, in its own directory (``ServerConfig.home``)
HOME_PARTS = "parts"

# The bounds of the run parameters (checked where ``callid run`` reads them: callid.run.check_options).
#: strip sizes: a strip of a few sectors up to 1 GiB
MIN_STRIP_SIZE, MAX_STRIP_SIZE = 256, 1 << 30
#: flow buffers: one page up to 64 MiB (a server holds a few per flow)
MIN_FLOW_BUFFER, MAX_FLOW_BUFFER = 4096, 64 << 20
#: a strip is cut into at most this many flow buffers (more only multiplies the events)
MAX_BUFFERS_PER_STRIP = 1024
#: I/O servers of one file system (each a process)
MAX_IO_SERVERS = 256
#: memory a rank or a server process needs at least (bounds how many this machine can start)
PROCESS_BYTES = 64 << 20


def host_of(world_rank: int, ranks_per_host: int) -> int:
    """The simulated host of a rank: ranks ``[h*n, (h+1)*n)`` share host ``h`` (0 per host: all on 0)."""
    return world_rank // ranks_per_host if ranks_per_host > 0 else 0


def io_server(i: int) -> str:
    """The name of the I/O server number ``i``."""
    return f"io{i}"


def secret_beside(config_path: str | os.PathLike[str]) -> Path:
    """The secret's file of the configuration ``config_path`` (``fs.json``: ``fs.secret``)."""
    return Path(config_path).with_suffix(Path(SECRET_FILE).suffix)


@dataclass
class ServerConfig:
    """One server process."""

    name: str
    roles: list[str]
    storage: str
    host: str = "127.0.0.1"
    port: int = 0  # 0: not started yet
    # Its own directory on its host (``callid fs init``; empty: a server of ``callid run``): its address
    # file (with its process id), its output and its log parts (HOME_PARTS).
    home: str = ""


@dataclass
class Config:
    """Everything the servers and the client wrappers of one run share."""

    run_id: str
    servers: list[ServerConfig]
    trace_dir: str  # where every rank and server writes its log parts
    callid_layout: str = str(DEFAULT_LAYOUT)  # TOTAL/RANK bits of the CallID (callid_core.ids.Layout)
    mount: list[str] = field(default_factory=lambda: [DEFAULT_MOUNT])
    callid: bool = True  # False: trace but do not stamp or propagate CallIDs
    strip_size: int = DEFAULT_STRIP_SIZE
    flow_buffer: int = DEFAULT_FLOW_BUFFER
    small_io: int = DEFAULT_SMALL_IO  # 0 disables small I/O
    flush_rows: int = DEFAULT_FLUSH_ROWS
    ranks_per_host: int = 0  # simulated hosts: ranks [h*n, (h+1)*n) share host h; 0: one host
    mpi_io: str = MpiIo.CALLID.value  # the MPI-IO the calls went through (callid_core.choices.MpiIo)
    # What the data operations move and store (callid_core.choices.Payload): the servers serve it,
    # each I/O request says it (a server refuses one that says otherwise)
    payload: str = Payload.FULL.value
    clock_skew: dict[str, dict] = field(default_factory=dict)  # domain -> callid_core.clock.Skew
    clock_t0: int = 0  # ns, machine clock: the time from which injected drifts accumulate
    # Only for measuring what logging costs (bench/), not a user feature: False logs nothing.
    client_events: bool = True
    server_events: bool = True
    # The tracers' switches (HDTrace's wrapper has them): the hints of open, set_view, set_info and delete
    # (MPI_Info) logged; the collective MPI calls without I/O (mpi_calls) logged.  Off, the checks that
    # need them are not decidable from the run (callid_core.evidence.SWITCHED).  The MPI calls the MPI-IO
    # makes inside a traced call (nested_calls) logged: off by default, as HDTrace's HDTRACE_NESTED.
    trace_hints: bool = True
    trace_mpi: bool = True
    trace_nested: bool = False
    # The server event layers logged at the start (the thesis' event mask; SERVER_LAYERS: all); a
    # server's mask changes at run time by request (event_mask), which logs an event of its own.
    server_layers: list[str] = field(default_factory=lambda: list(SERVER_LAYERS))
    secret_file: str = ""  # the file holding the secret every connection proves it holds (new_secret)
    # The servers' disks and links (callid_core.devices.DeviceModel as a dict; empty: the real files and
    # sockets, unmodelled) and the faults planted in them or in ranks (server or rankN ->
    # callid_core.devices.Fault): the truth, never read by analyses
    disk_model: dict = field(default_factory=dict)
    net_model: dict = field(default_factory=dict)
    faults: dict[str, dict] = field(default_factory=dict)
    # What a server allows (bounds on the resources one client can take):
    max_flow: int = DEFAULT_MAX_FLOW
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT

    @property
    def meta_server(self) -> ServerConfig:
        return next(s for s in self.servers if ROLE_META in s.roles)

    @property
    def io_servers(self) -> list[ServerConfig]:
        return [s for s in self.servers if ROLE_IO in s.roles]

    def server(self, name: str) -> ServerConfig:
        for s in self.servers:
            if s.name == name:
                return s
        raise InputError(f"no server named {name!r} in the configuration")

    def trace_dir_of(self, srv: ServerConfig) -> str:
        """Where ``srv`` writes its log parts: its own directory's, else the run's."""
        return os.path.join(srv.home, HOME_PARTS) if srv.home else self.trace_dir

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    def secret(self) -> bytes:
        """The file system's secret, read from :attr:`secret_file`; :class:`InputError` if there is
        none, or if others than its owner may read or write the file."""
        if not self.secret_file:
            raise InputError("the file system configuration names no secret file "
                             "(made by callid run or callid fs init)")
        try:
            fd = os.open(self.secret_file, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as exc:
            raise InputError(f"{self.secret_file}: cannot read the file system's secret ({exc.strerror})") \
                from None
        with os.fdopen(fd) as f:
            info = os.fstat(fd)
            if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO) or info.st_uid != os.getuid():
                raise InputError(f"{self.secret_file}: the secret file must be its owner's only "
                                 f"(mode 0600; it is {stat.S_IMODE(info.st_mode):04o})")
            text = f.read(4 * SECRET_BYTES).strip()
        try:
            key = bytes.fromhex(text)
        except ValueError:
            key = b""
        if len(key) != SECRET_BYTES:
            raise InputError(f"{self.secret_file}: not a file system secret ({2 * SECRET_BYTES} hex digits)")
        return key

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write atomically (temporary name, then rename)."""
        with replacing(path) as tmp:
            tmp.write_text(self.to_json())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Config:
        """Read a configuration; a file that is not one raises :class:`InputError`."""
        try:
            data = json.loads(Path(path).read_text())
            data["servers"] = [ServerConfig(**s) for s in data["servers"]]
            config = cls(**data)
            Payload(config.payload), MpiIo(config.mpi_io)  # (a value no choice has: ValueError)
            return config
        except OSError as exc:
            raise InputError(f"{path}: cannot read the file system configuration ({exc.strerror})") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(f"{path}: not a callid file system configuration ({exc})") from None


def new_secret(path: str | os.PathLike[str]) -> None:
    """Write a new random secret to ``path``, readable and writable by its owner only (0600),
    atomically (a temporary name made with those permissions, then a rename)."""
    tmp = temporary(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)  # (whatever the umask, and whatever a stale temporary had)
        os.write(fd, (secrets.token_hex(SECRET_BYTES) + "\n").encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)
