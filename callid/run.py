"""``callid run``: create a file system, start its servers, run the ranks, collect the logs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import callid.servers as servers
from callid.launch import NO_ABORT_ENV, die_with_parent, signal_ranks
from callid.romio import launch as romio_launch
from callid.romio import session as romio_session
from callid.server_wire import RunError, log_parts, ping, take_log_parts
from callid_core import config as defaults
from callid_core import schema as S
from callid_core.atomic import replacing
from callid_core.choices import SERVER_LAYERS, MpiIo, Payload
from callid_core.clock import parse_skew, skews_to_json
from callid_core.config import (
    CONFIG_ENV,
    META_SERVER,
    ROLE_IO,
    ROLE_META,
    SECRET_FILE,
    Config,
    ServerConfig,
    io_server,
    new_secret,
    secret_beside,
)
from callid_core.devices import faults_from_json, faults_to_json, parse_faults, parse_model, straggles
from callid_core.errors import BadValue, InputError, os_reason
from callid_core.ids import DEFAULT_LAYOUT, Layout
from callid_core.partlog import combine_parts
from callid_core.units import ranks_phrase
from server_sim import bmi


@dataclass
class RunOptions:
    """The parameters of ``callid run``."""

    target: list[str]  # [SCRIPT, ARGS...] or ["-m", MODULE, ARGS...]
    np: int = defaults.DEFAULT_RANKS
    servers: int = defaults.DEFAULT_IO_SERVERS
    strip_size: int = defaults.DEFAULT_STRIP_SIZE
    flow_buffer: int = defaults.DEFAULT_FLOW_BUFFER
    small_io: int = defaults.DEFAULT_SMALL_IO
    callid: bool = True
    callid_layout: str = str(DEFAULT_LAYOUT)
    mount: list[str] = field(default_factory=lambda: [defaults.DEFAULT_MOUNT])
    ranks_per_host: int = 0
    clock_skew: str = ""  # callid_core.clock skew specification, e.g. server:0=+40ms@30ppm
    disk_model: str = ""  # callid_core.devices disk model, e.g. latency=5ms,bandwidth=200MiB/s,queue=4
    net_model: str = ""  # callid_core.devices link model, e.g. latency=50us,bandwidth=1GiB/s
    faults: list[str] = field(default_factory=list)  # callid_core.devices faults, e.g. io1:disk=slow:20x
    out: str = "callid-out"
    timeout: float | None = None
    quiet: bool = False
    capture: bool = False  # keep the ranks' standard output in RunResult.stdout
    stdout_to_stderr: bool = False  # the ranks' standard output goes to stderr (stdout is for --json)
    client_events: bool = True  # False: ranks log nothing (bench/ only: the cost of logging)
    server_events: bool = True  # False: servers log nothing (bench/ only)
    server_layers: list[str] = field(default_factory=lambda: list(SERVER_LAYERS))  # the event mask
    flush_rows: int = defaults.DEFAULT_FLUSH_ROWS  # rows a log part holds before it is written (1: each)
    trace_hints: bool = True  # the tracers' switches (Config.trace_hints, trace_mpi, trace_nested)
    trace_mpi: bool = True
    trace_nested: bool = False
    launcher: str = "callid.launch"  # the module each rank runs (target: its arguments)
    source: str = ""  # what the run replays (the client log's callid.source metadata)
    source_notes: list[str] = field(default_factory=list)  # what the replay says of it (callid.source_notes)
    source_job: dict[str, str] = field(default_factory=dict)  # what the source says of its job (callid.job.*)
    source_rows: pa.Table | None = None  # client-log rows the source gives (a replay's kind 'source' rows)
    on_wait: Callable[[], None] | None = None  # called about 4 times a second while the ranks run
    fs: str = ""  # a configuration of callid fs init: use its servers, which run already
    mpi_io: MpiIo | None = None  # callid's MPI-IO (Python only) or the MPI library's; None: by the target
    mpicc: str | None = None  # the compiler wrapper the interposition library is built with (--mpi-io romio)
    payload: Payload = Payload.FULL  # what the file system's data operations move and store


@dataclass
class RunResult:
    out: Path
    client: Path
    server: Path
    client_rows: int
    server_rows: int
    seconds: float
    stdout: str = ""


def find_mpiexec() -> str:
    """The launcher of the ``mpich`` wheel (next to this Python), else one on PATH."""
    here = Path(sys.executable).parent
    for candidate in (here / "mpiexec", here / "mpiexec.hydra"):
        if candidate.exists():
            return str(candidate)
    found = shutil.which("mpiexec")
    if not found:
        raise RunError("no mpiexec found: install the 'mpich' wheel (pip install mpich)")
    return found


def check_options(opts: RunOptions) -> None:
    """Raise :class:`BadValue` naming the option whose value cannot work, and its bounds."""
    _check_bounds(opts)
    if opts.timeout is not None and not 0 < opts.timeout <= defaults.MAX_TIMEOUT:
        raise BadValue(f"--timeout: {opts.timeout} is not a number of seconds above 0 and at most "
                       f"{defaults.MAX_TIMEOUT:.0f} (30 days)")
    for mount in opts.mount:
        if not mount.startswith("/") or mount.rstrip("/") == "":
            raise BadValue(f"--mount: {mount!r} is not an absolute path below / (e.g. /pvfs2)")
    if opts.fs and (opts.disk_model or opts.net_model or opts.faults):
        raise BadValue("--disk-model, --net-model, --fault: not with --fs (the file system's servers run "
                       "already, with their disks and links as they are)")
    # (a program's ranks are its np; a replay's driver runs source ranks, which it checks itself; callid fs
    # init's file system serves runs of any size)
    program = opts.target and opts.launcher == RunOptions.launcher
    check_devices(opts, opts.servers, opts.np if program else None)
    if mpi_io(opts) == MpiIo.ROMIO:
        _check_romio(opts)
    elif opts.launcher == RunOptions.launcher and opts.target and not romio_launch.is_python(opts.target):
        raise BadValue(f"--mpi-io callid: {opts.target[0]} is not a Python program (callid's MPI-IO runs "
                       "mpi4py programs; an executable runs on its MPI library: --mpi-io romio)")


def check_devices(opts: Any, servers: int, ranks: int | None) -> None:
    """:class:`BadValue` naming --disk-model, --net-model or --fault when ``opts``' value cannot work for
    a file system of ``servers`` I/O servers (meta0 and io0 .. io{N-1}) and ``ranks`` ranks (None:
    not known yet)."""
    names = [META_SERVER, *map(io_server, range(servers))]
    for flag, parse in (("--disk-model", lambda: parse_model(opts.disk_model, "disk")),
                        ("--net-model", lambda: parse_model(opts.net_model, "net")),
                        ("--fault", lambda: parse_faults(opts.faults, names, ranks))):
        try:
            parse()
        except BadValue as exc:
            raise BadValue(f"{flag}: {exc}") from None


def _check_bounds(opts: RunOptions) -> None:
    """:class:`BadValue` for a number of the run out of its bounds (the machine's memory bounds the
    processes)."""
    layout = Layout.parse(opts.callid_layout)
    machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // defaults.PROCESS_BYTES
    bounds = [
        ("--strip-size", opts.strip_size, defaults.MIN_STRIP_SIZE, defaults.MAX_STRIP_SIZE),
        ("--flow-buffer", opts.flow_buffer, max(defaults.MIN_FLOW_BUFFER,
                                                opts.strip_size // defaults.MAX_BUFFERS_PER_STRIP),
         defaults.MAX_FLOW_BUFFER),
        ("--small-io", opts.small_io, 0, bmi.UNEXPECTED_LIMIT),  # (requests carry at most SMALL_IO_MAX_DATA)
        ("--np", opts.np, 1, min(layout.max_rank + 1, machine)),
        ("--servers", opts.servers, 1, min(defaults.MAX_IO_SERVERS, machine)),
        ("--ranks-per-host", opts.ranks_per_host, 0, layout.max_rank + 1),
    ]
    for flag, value, lo, hi in bounds:
        if not lo <= value <= hi:
            why = _bound_reason(flag, lo, hi, layout)
            raise BadValue(f"{flag}: {value} is not between {lo} and {hi}{why}")


def _bound_reason(flag: str, lo: int, hi: int, layout: Layout) -> str:
    """`` (WHY)`` for a bound set by something else than the option: the CallID layout, the strip size."""
    if flag in ("--np", "--ranks-per-host") and hi == layout.max_rank + 1:
        return f" (CallID layout {layout} holds ranks 0-{layout.max_rank})"
    if flag == "--flow-buffer" and lo > defaults.MIN_FLOW_BUFFER:
        return f" (at most {defaults.MAX_BUFFERS_PER_STRIP} per strip)"
    return ""


def _check_romio(opts: RunOptions) -> None:
    """:class:`BadValue` for what a run on the MPI library (``--mpi-io romio``) cannot have."""
    for flag, value in (("--ranks-per-host", opts.ranks_per_host), ("--clock-skew", opts.clock_skew)):
        if value:
            raise BadValue(f"{flag}: not with --mpi-io romio (its ranks and their file-system client run "
                           "on this host's clock)")
    if len(opts.mount) != 1:
        raise BadValue("--mount: --mpi-io romio mounts one file system (give --mount once)")
    program = opts.target[0] if opts.target and not romio_launch.is_python(opts.target) else ""
    if os.path.isfile(program) and not os.access(program, os.X_OK):
        raise BadValue(f"{program}: is not an executable (build the program with mpicc, or chmod +x it)")


def mpi_io(opts: RunOptions) -> MpiIo:
    """The MPI-IO a run's calls go through: as asked, else callid's for a Python program (and for a
    launcher of callid's own, e.g. the replay's) and the MPI library's (ROMIO) for an executable."""
    if opts.mpi_io is not None:
        return MpiIo(opts.mpi_io)
    if opts.launcher != RunOptions.launcher or not opts.target or romio_launch.is_python(opts.target):
        return MpiIo.CALLID
    return MpiIo.ROMIO


def make_config(opts: RunOptions, out: Path, secret_file: Path | None = None) -> Config:
    """The file system of one run: one metadata server and ``opts.servers`` I/O servers, and a new
    secret that every connection to them proves it holds (``secret_file``, default ``out/fs.secret``,
    its owner's only).

    Raises ``callid_core.clock.SkewError`` for a bad ``opts.clock_skew``, ``callid_core.devices.FaultError``
    for a bad ``opts.disk_model``, ``opts.net_model`` or ``opts.faults``.
    """
    storage = out / "storage"
    servers = [ServerConfig(META_SERVER, [ROLE_META], str(storage / META_SERVER))]
    io = [io_server(i) for i in range(opts.servers)]
    servers += [ServerConfig(name, [ROLE_IO], str(storage / name)) for name in io]
    hosts = -(-opts.np // opts.ranks_per_host) if opts.ranks_per_host else 1
    skews = parse_skew(opts.clock_skew, [s.name for s in servers],
                       [s.name for s in servers if ROLE_IO in s.roles], hosts)
    disk, net = parse_model(opts.disk_model, "disk"), parse_model(opts.net_model, "net")
    faults = parse_faults(opts.faults, [s.name for s in servers])
    out.mkdir(parents=True, exist_ok=True)
    secret = Path(os.path.abspath(secret_file or out / SECRET_FILE))
    new_secret(secret)
    return Config(secret_file=str(secret),
        run_id=uuid.uuid4().hex[:12], servers=servers, trace_dir=str(out / "parts"),
        mount=[os.path.abspath(m) for m in opts.mount], callid_layout=opts.callid_layout, callid=opts.callid,
        strip_size=opts.strip_size, flow_buffer=opts.flow_buffer,
        small_io=opts.small_io, ranks_per_host=opts.ranks_per_host, mpi_io=mpi_io(opts).value,
        payload=Payload(opts.payload).value,
        clock_skew=skews_to_json(skews), clock_t0=time.time_ns(),
        disk_model=asdict(disk) if disk else {}, net_model=asdict(net) if net else {},
        faults=faults_to_json(faults),
        client_events=opts.client_events, server_events=opts.server_events,
        server_layers=list(opts.server_layers), flush_rows=opts.flush_rows, trace_hints=opts.trace_hints,
        trace_mpi=opts.trace_mpi, trace_nested=opts.trace_nested,
    )


class ServerGroup:
    """The server processes of one file system; stopping them is always safe.

    ``run_dir``: where their address files and output go (None: each server's own directory,
    ``ServerConfig.home``); ``names``: the servers to start (default: all); ``detach``: servers that
    outlive this process (``callid servers start``), of a configuration with fixed addresses that is
    not rewritten.
    """

    def __init__(self, config: Config, config_path: Path, run_dir: Path | None = None,
                 names: list[str] | None = None, detach: bool = False) -> None:
        self.config = config
        self.config_path = config_path
        self.run_dir = run_dir
        self.servers = [config.server(n) for n in names] if names else list(config.servers)
        self.detach = detach
        self.procs: dict[str, subprocess.Popen] = {}

    def _file(self, srv: ServerConfig, suffix: str) -> Path:
        """The server's address file (``.addr``) or output (``.log``)."""
        return (self.run_dir or Path(srv.home)) / f"{srv.name}{suffix}"

    def start(self, timeout: float = 30.0) -> None:
        """Start every server, wait for its address, write the final config, ping each; when one
        fails, the servers started are stopped before the error is raised."""
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout: float) -> None:
        if not self.detach:
            self.config.save(self.config_path)
        for srv in self.servers:
            addr = self._file(srv, ".addr")
            addr.unlink(missing_ok=True)
            log = open(self._file(srv, ".log"), "wb")  # noqa: SIM115 (child owns it)
            self.procs[srv.name] = subprocess.Popen(
                [sys.executable, "-m", "server_sim", "serve", "--config", str(self.config_path),
                 "--name", srv.name, "--addr-file", str(addr), "--log-level", "INFO"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=None if self.detach else die_with_parent,
            )
            log.close()
        deadline = time.monotonic() + timeout
        for srv in self.servers:
            addr = self._file(srv, ".addr")
            while not addr.exists():
                if self.procs[srv.name].poll() is not None:
                    code = self.procs[srv.name].returncode
                    raise RunError(f"server {srv.name} {_ended(code)} at start-up"
                                   f"{_last_line(self._file(srv, '.log'), code > 0)}")
                if time.monotonic() > deadline:
                    raise RunError(f"server {srv.name} did not start within {timeout:.0f} s")
                time.sleep(0.02)
            info = json.loads(addr.read_text())
            srv.host, srv.port = info["host"], info["port"]
        if not self.detach:
            self.config.save(self.config_path)
        secret = self.config.secret()
        for srv in self.servers:
            ping(srv, secret)

    def stop(self, timeout: float = 20.0) -> list[str]:
        """SIGTERM every server (they flush their logs); kill stragglers; return failures."""
        failures = []
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for name, proc in self.procs.items():
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                failures.append(f"server {name} did not stop within {timeout:.0f} s and was killed")
                continue
            if code not in (0, -signal.SIGTERM):
                failures.append(f"server {name} {_ended(code)}"
                                f"{_last_line(self._file(self.config.server(name), '.log'), code > 0)}")
        return failures


def _ended(code: int) -> str:
    """How a process of exit status ``code`` (Popen's: -N for signal N) ended."""
    if code >= 0:
        return f"exited with status {code}"
    try:
        return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


def _last_line(log: Path, quote: bool = True) -> str:
    """``: LAST LINE (see LOG)`` of a server's output, to say why it ended (``quote``: else a process
    killed by a signal wrote no reason: only ``(see LOG)``)."""
    try:
        lines = log.read_text(errors="replace").strip().splitlines() if quote else []
    except OSError:
        lines = []
    return (f": {lines[-1].strip()}" if lines else "") + f" (see {log})"


def run(opts: RunOptions) -> RunResult:
    """Do one traced run; raise :class:`RunError` naming what failed.

    SIGTERM, SIGINT and SIGHUP stop the ranks and the servers, which flush their logs; the logs are
    still combined, and the error's exit status is 128 + the signal's number.
    """
    t0 = time.monotonic()
    check_options(opts)
    out = Path(opts.out)
    if opts.fs:
        config = fs_run_config(opts, out)
    else:
        config = make_config(opts, out)
        _check_storage(out / "storage", opts.servers)
    out.mkdir(parents=True, exist_ok=True)
    parts = out / "parts"
    parts.mkdir(exist_ok=True)
    for pattern in PART_FILES:  # what an earlier run left; nothing else in the directory is touched
        for path in parts.glob(pattern):
            path.unlink()
    if opts.source_rows is not None and opts.source_rows.num_rows:
        with replacing(parts / "client-source.000000.parquet") as tmp:
            pq.write_table(opts.source_rows.cast(S.CLIENT_SCHEMA), tmp)
    config_path = out / "fs.json"
    group: ServerGroup | RunningServers
    if opts.fs:
        group = RunningServers(config, config_path, parts)
    else:
        run_dir = out / "servers"
        run_dir.mkdir(exist_ok=True)
        group = ServerGroup(config, config_path, run_dir)
    failures: list[str] = []
    stdout = ""
    interrupted: signal.Signals | None = None
    with _stop_signals() as stops:
        try:
            group.start()
            stdout, failed = _run_ranks(opts, config, config_path, parts)
            failures += failed
        except Interrupted as exc:
            interrupted = exc.signal
        finally:
            stops.raising = False  # (from here on a stop signal is counted: the logs are written anyway)
            failures += group.stop()
        client, server, client_rows, server_rows = _combine(opts, config, out, parts, failures)
        interrupted = interrupted or (stops.received[0] if stops.received else None)
    if interrupted is not None:
        error = RunError("; ".join([f"stopped by {interrupted.name}: ranks and servers stopped", *failures])
                         + f" (the events they logged are in {client} and {server})")
        error.exit_code = 128 + interrupted
        raise error
    if failures:
        raise RunError("; ".join(failures) + f" (the events logged before are in {client} and {server})")
    for part in [*parts.glob("client-*.parquet"), *parts.glob("server-*.parquet")]:
        part.unlink()  # (in client.parquet and server.parquet now: only a failed run keeps its parts)
    return RunResult(out, client, server, client_rows, server_rows, time.monotonic() - t0, stdout)


def _combine(opts: RunOptions, config: Config, out: Path, parts: Path,
             failures: list[str]) -> tuple[Path, Path, int, int]:
    """The run's client and server logs from the parts its ranks and servers flushed (even a failed
    run keeps them): their paths and rows."""
    meta_args = (opts.callid_layout, config.run_id, config.to_json(), opts.source, opts.source_notes,
                 opts.source_job)
    if mpi_io(opts) == MpiIo.ROMIO:
        romio_launch.collect(parts, S.file_metadata(S.KIND_CLIENT, *meta_args))
    client = out / "client.parquet"
    server = out / "server.parquet"
    try:
        client_rows = combine_parts(sorted(parts.glob("client-*.parquet")), client, S.CLIENT_SCHEMA,
                                    S.file_metadata(S.KIND_CLIENT, *meta_args))
        server_rows = combine_parts(sorted(parts.glob("server-*.parquet")), server, S.SERVER_SCHEMA,
                                    S.file_metadata(S.KIND_SERVER, *meta_args))
    except OSError as exc:  # (a full disk: the run's own failures say more, if there are any)
        raise RunError("; ".join([f"cannot write the logs of the run in {out} ({os_reason(exc)}; what the "
                                  f"ranks and servers flushed is in {parts})", *failures])) from None
    return client, server, client_rows, server_rows


def fs_run_config(opts: RunOptions, out: Path) -> Config:
    """The configuration of a run on the servers of ``opts.fs`` (``callid fs init``): theirs, with the
    run's own id, trace directory (``out/parts``) and client options."""
    fs = load_fs(opts.fs)
    late = [r for r in straggles(faults_from_json(fs.faults)) if r >= opts.np]
    if late and opts.launcher == RunOptions.launcher:
        raise BadValue(f"--fs {opts.fs}: its fault rank{late[0]}:straggle names a rank beyond -n {opts.np} "
                       f"(ranks 0 to {opts.np - 1})")
    return replace(fs, run_id=uuid.uuid4().hex[:12], trace_dir=str((out / "parts").resolve()),
                   mount=[os.path.abspath(m) for m in opts.mount], callid=opts.callid, small_io=opts.small_io,
                   ranks_per_host=opts.ranks_per_host, client_events=opts.client_events, mpi_io=mpi_io(opts),
                   flush_rows=opts.flush_rows, trace_hints=opts.trace_hints, trace_mpi=opts.trace_mpi,
                   trace_nested=opts.trace_nested)


class RunningServers:
    """The servers of a run with ``--fs``: they run already (``callid servers start``, on any host) and
    go on running after it.  The run checks that each answers, and takes the log parts they write
    while it runs, over the wire (their directories may be on hosts this one cannot see): it asks each
    to flush its log at its start and at its end, and copies the parts written in between to
    ``parts``, removing them from the server.  (Stopping them would flush too, but a file system
    serves many runs.)"""

    def __init__(self, config: Config, config_path: Path, parts: Path) -> None:
        self.config = config
        self.config_path = config_path
        self.parts = parts
        self.before: dict[str, set[str]] | None = None

    def start(self) -> None:
        """Write the run's configuration, ping every server, flush their logs."""
        self.config.save(self.config_path)
        secret = self.config.secret()
        for srv in self.config.servers:
            ping(srv, secret)
        self.before = {srv.name: set(log_parts(srv, secret)) for srv in self.config.servers}

    def stop(self) -> list[str]:
        """Flush the servers' logs and take the parts written since :meth:`start`; what failed."""
        if self.before is None:
            return []
        secret = self.config.secret()
        failures = []
        for srv in self.config.servers:
            try:
                parts = log_parts(srv, secret)
                new = {name: size for name, size in parts.items() if name not in self.before[srv.name]}
                take_log_parts(srv, secret, new, self.parts)
            except RunError as exc:
                failures.append(f"{exc}: its last events are not in this run's log")
        return failures


def init_fs(spec: str, output: Path, server_dir: Path | None, opts: RunOptions,
            first_port: int = defaults.DEFAULT_PORT) -> Config:
    """``callid fs init``: write the configuration of a file system whose servers run where ``spec``
    says (``HOST[:PORT]:NAME,...``, ``callid.servers.parse_servers``), each with its directory under
    ``server_dir`` (default: ``servers`` beside ``output``), and its new secret beside ``output``
    (``.secret``, its owner's only).  The client's trace directory is ``parts`` beside ``output``."""
    placements = servers.parse_servers(spec, first_port)
    opts.servers = len(placements) - 1
    check_options(opts)
    here = output.resolve().parent
    where = server_dir or here / "servers"
    existing = next(p for p in (where.absolute(), *where.absolute().parents) if p.exists())
    if not existing.is_dir():  # (on this machine; on a shared file system, every host sees the same)
        raise BadValue(f"--server-dir {where}: {existing} is not a directory")
    config = make_config(opts, here, secret_file=secret_beside(output))
    servers.place(config, placements, where)
    config.save(output)
    return config


def load_fs(config_path: str | os.PathLike[str]) -> Config:
    """The configuration of a file system of ``callid fs init``, its secret readable by its owner only;
    :class:`InputError` if it is not one (a ``callid run`` makes and stops its own servers)."""
    fs = Config.load(config_path)
    fs.secret()  # (one line now if it is missing, or others may read it)
    for srv in fs.servers:
        if not srv.home:
            raise InputError(f"{config_path}: server {srv.name} has no directory of its own: not a "
                             "configuration of callid fs init (callid run makes and stops its own servers)")
    return fs


def start_servers(config_path: Path, names: list[str] | None = None) -> list[ServerConfig]:
    """``callid servers start``: start the servers named, else those of this host, in the background;
    return them once each answers.  Their log parts of an earlier start are kept (``parts.N``)."""
    config = load_fs(config_path)
    chosen = servers.select(config, names)
    for srv in chosen:
        pid = servers.running_pid(srv)
        if pid is not None:
            raise RunError(f"server {srv.name} runs already (process {pid}); callid servers stop stops it")
        Path(srv.home).mkdir(parents=True, exist_ok=True)
        servers.keep_earlier_log(config, srv)
    ServerGroup(config, config_path.resolve(), names=[s.name for s in chosen], detach=True).start()
    return chosen


def server_status(config: Config, timeout: float = 2.0) -> list[dict[str, Any]]:
    """``callid servers status``: each server's address, its process (when on this machine) and
    whether it answers (a ping proving the secret)."""
    secret = config.secret()
    rows = []
    for srv in config.servers:
        try:
            ping(srv, secret, timeout)
            error = ""
        except RunError as exc:
            error = str(exc)
        rows.append({"server": srv.name, "address": f"{srv.host}:{srv.port}", "roles": srv.roles,
                     "process": servers.process_state(srv), "answers": not error, "error": error})
    return rows


#: what a run writes in ``DIR/parts`` (and removes there before it starts)
PART_FILES = ("client-*.parquet", "server-*.parquet", "rank-*.running", "rank-*.failed", "rank-*.stopped",
              "rank-*.traceback",
              *romio_launch.PART_FILES)


def _check_storage(storage: Path, servers: int) -> None:
    """A run on storage made with more I/O servers would lose the files striped over the others."""
    made = [p.name for p in storage.glob("io*") if p.is_dir() and p.name[2:].isdigit()]
    if len(made) > servers:
        raise RunError(f"{storage} was made with {len(made)} I/O servers; run with --servers {len(made)} "
                       "or another --out-dir")


class Interrupted(Exception):
    """A stop signal reached ``callid run``."""

    def __init__(self, sig: signal.Signals) -> None:
        super().__init__(sig.name)
        self.signal = sig


@dataclass
class _Stops:
    """The stop signals ``callid run`` received; the first raises :class:`Interrupted` while
    ``raising``, the others (and any once it is off) are only counted."""

    received: list[signal.Signals] = field(default_factory=list)
    raising: bool = True


@contextmanager
def _stop_signals() -> Iterator[_Stops]:
    """Turn SIGTERM, SIGINT and SIGHUP into :class:`Interrupted` (once) while the block runs."""
    stops = _Stops()
    if threading.current_thread() is not threading.main_thread():
        yield stops
        return

    def handler(signum: int, frame: Any) -> None:
        stops.received.append(signal.Signals(signum))
        if stops.raising and len(stops.received) == 1:
            raise Interrupted(signal.Signals(signum))

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        yield stops
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)


def _run_ranks(opts: RunOptions, config: Config, config_path: Path, parts: Path) -> tuple[str, list[str]]:
    """Run the ranks; their standard output (with ``opts.capture``) and what failed.

    ``mpiexec -disable-auto-cleanup``: a rank that ends early does not get the others killed before
    they flush; the launcher sends them SIGUSR1 instead (``callid.launch``).
    """
    env = dict(os.environ, **{CONFIG_ENV: str(config_path.resolve()), NO_ABORT_ENV: "1"})
    romio = mpi_io(opts) == MpiIo.ROMIO
    if romio:
        cmd, more = romio_launch.command(opts.target, opts.np, find_mpiexec(), config_path, parts,
                                         opts.mount[0], opts.callid_layout, opts.callid, opts.mpicc,
                                         hints=opts.trace_hints, mpi=opts.trace_mpi, nested=opts.trace_nested,
                                         straggle=straggles(faults_from_json(config.faults)))
        env.update(more)
    else:
        cmd = [find_mpiexec(), "-disable-auto-cleanup", "-n", str(opts.np), sys.executable, "-m",
               opts.launcher, *opts.target]
    stdout = (subprocess.PIPE if opts.capture else subprocess.DEVNULL if opts.quiet
              else sys.stderr.fileno() if opts.stdout_to_stderr else None)
    try:
        proc = subprocess.Popen(cmd, env=env, stdout=stdout, text=opts.capture, start_new_session=True,
                                preexec_fn=_in_namespace if romio else die_with_parent)
    except subprocess.SubprocessError:
        if not romio:
            raise
        raise RunError("--mpi-io romio: cannot make a mount namespace for the run's FUSE mount (it needs "
                       "root, or a kernel that lets users make namespaces)") from None
    with proc:
        try:
            out, timed_out = _wait_ranks(proc, opts, parts, env[CONFIG_ENV], romio)
        except BaseException:
            _stop_ranks(proc, parts, env[CONFIG_ENV], romio)
            raise
    msgs = [f"ranks did not finish within {opts.timeout} s and were stopped"] if timed_out else []
    return out or "", msgs + _rank_failures(parts, proc.returncode)


def _wait_ranks(proc: subprocess.Popen, opts: RunOptions, parts: Path, config: str,
                romio: bool) -> tuple[str, bool]:
    """Until ``mpiexec`` ends: its standard output, and whether the ranks were stopped at the run's
    timeout.  A rank that stopped or failed and whose peers mpiexec did not tell (its keeper killed)
    gets them told after ``PEERS_GRACE``."""
    deadline = None if opts.timeout is None else time.monotonic() + opts.timeout
    ended: float | None = None  # when a rank was first seen to have stopped or failed
    while True:
        try:
            out, _ = proc.communicate(timeout=0.25)
            return out, False
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() > deadline:
                _stop_ranks(proc, parts, config, romio)
                return "", True
            if ended is None and _a_rank_ended(parts):
                ended = time.monotonic()
            elif ended is not None and time.monotonic() - ended > PEERS_GRACE:
                signal_ranks(parts, config, signal.SIGUSR1)  # (once: mpiexec may not have)
                ended = float("inf")
            if opts.on_wait is not None:
                opts.on_wait()


def _in_namespace() -> None:
    """In the child running a run on the MPI library: its own mount namespace, and die with this process."""
    romio_session.enter_namespace()
    die_with_parent()


#: seconds after a rank stopped or failed before callid run tells the ranks still running, as mpiexec
#: does at once when a rank exits (not when the process it started is killed: then it tells no one)
PEERS_GRACE = 2.0


def _a_rank_ended(parts: Path) -> bool:
    """Has a rank stopped or failed (its marker, ``callid.launch``)?"""
    return any(parts.glob("rank-*.failed")) or any(parts.glob("rank-*.stopped"))


def _stop_ranks(proc: subprocess.Popen, parts: Path, config: str, romio: bool = False,
                grace: float = 10.0) -> None:
    """SIGTERM every rank still running (each flushes its log), then the rest of mpiexec's session.
    (On the MPI library: SIGTERM the session, which passes it on to mpiexec and unmounts.)"""
    if romio and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    signal_ranks(parts, config, signal.SIGTERM)
    try:
        proc.communicate(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait()


def _rank_failures(parts: Path, status: int) -> list[str]:
    """What went wrong with which rank, the causes first, from the markers ``callid.launch`` leaves."""
    def by_rank(what: str) -> list[tuple[int, str]]:
        found = [(int(p.name.split("-")[1].split(".")[0]), p) for p in parts.glob(f"rank-*.{what}")]
        return [(rank, p.read_text().strip()) for rank, p in sorted(found)]

    def traceback_of(rank: int) -> str:
        found = parts / f"rank-{rank}.traceback"
        return f" (traceback in {found})" if found.exists() else ""

    msgs = [f"rank {rank} failed: {text}{traceback_of(rank)}" for rank, text in by_rank("failed")]
    msgs += [f"rank {rank} ended without saying why (killed by a signal or crashed; mpiexec's exit "
             f"status {status})" for rank, _ in by_rank("running")]
    failed = {rank for rank, _ in by_rank("failed")}  # (a failed rank stopped too: its failure says why)
    stopped = [(rank, text) for rank, text in by_rank("stopped") if rank not in failed]
    for sig in sorted({text for _, text in stopped}):
        ranks = ranks_phrase([rank for rank, text in stopped if text == sig])
        cause = "after another rank ended" if sig == signal.SIGUSR1.name else f"by {sig}"
        msgs.append(f"{ranks} stopped {cause}, flushing {'their logs' if ranks[4] == 's' else 'its log'}")
    if status and not msgs:
        msgs.append(f"mpiexec exited with status {status}")
    return msgs
