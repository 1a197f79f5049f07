"""``callid run``: create a file system, start its servers, run the ranks, collect the logs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from callid_core import config as defaults
from callid_core import schema as S
from callid_core.clock import parse_skew, skews_to_json
from callid_core.config import CONFIG_ENV, ROLE_IO, ROLE_META, Config, ServerConfig
from callid_core.errors import Failed
from callid_core.ids import DEFAULT_LAYOUT
from callid_core.partlog import combine_parts
from server_sim import bmi
from server_sim import protocol as P


class RunError(Failed):
    """A run that could not be done; the message says which rank or server failed."""


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
    out: str = "callid-out"
    timeout: float | None = None
    quiet: bool = False
    capture: bool = False  # keep the ranks' standard output in RunResult.stdout
    stdout_to_stderr: bool = False  # the ranks' standard output goes to stderr (stdout is for --json)
    client_events: bool = True  # False: ranks log nothing (bench/ only: the cost of logging)
    server_events: bool = True  # False: servers log nothing (bench/ only)
    launcher: str = "callid.launch"  # the module each rank runs (target: its arguments)
    source: str = ""  # what the run replays (the client log's callid.source metadata)
    on_wait: Callable[[], None] | None = None  # called about 4 times a second while the ranks run


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


def make_config(opts: RunOptions, out: Path) -> Config:
    """The file system of one run: one metadata server and ``opts.servers`` I/O servers.

    Raises ``callid_core.clock.SkewError`` for a bad ``opts.clock_skew``.
    """
    storage = out / "storage"
    servers = [ServerConfig("meta0", [ROLE_META], str(storage / "meta0"))]
    servers += [ServerConfig(f"io{i}", [ROLE_IO], str(storage / f"io{i}")) for i in range(opts.servers)]
    hosts = -(-opts.np // opts.ranks_per_host) if opts.ranks_per_host else 1
    skews = parse_skew(opts.clock_skew, [s.name for s in servers],
                       [s.name for s in servers if ROLE_IO in s.roles], hosts)
    return Config(
        run_id=uuid.uuid4().hex[:12], servers=servers, trace_dir=str(out / "parts"),
        mount=[os.path.abspath(m) for m in opts.mount], callid_layout=opts.callid_layout, callid=opts.callid,
        strip_size=opts.strip_size, flow_buffer=opts.flow_buffer,
        small_io=opts.small_io, ranks_per_host=opts.ranks_per_host,
        clock_skew=skews_to_json(skews), clock_t0=time.time_ns(),
        client_events=opts.client_events, server_events=opts.server_events,
    )


class ServerGroup:
    """The server processes of one file system; stopping them is always safe."""

    def __init__(self, config: Config, config_path: Path, run_dir: Path) -> None:
        self.config = config
        self.config_path = config_path
        self.run_dir = run_dir
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, timeout: float = 30.0) -> None:
        """Start every server, wait for its address, write the final config, ping each."""
        self.config.save(self.config_path)
        for srv in self.config.servers:
            addr = self.run_dir / f"{srv.name}.addr"
            addr.unlink(missing_ok=True)
            log = open(self.run_dir / f"{srv.name}.log", "wb")  # noqa: SIM115 (child owns it)
            self.procs[srv.name] = subprocess.Popen(
                [sys.executable, "-m", "server_sim", "serve", "--config", str(self.config_path),
                 "--name", srv.name, "--addr-file", str(addr), "--log-level", "INFO"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
            log.close()
        deadline = time.monotonic() + timeout
        for srv in self.config.servers:
            addr = self.run_dir / f"{srv.name}.addr"
            while not addr.exists():
                if self.procs[srv.name].poll() is not None:
                    raise RunError(f"server {srv.name} exited with status "
                                   f"{self.procs[srv.name].returncode} at start-up "
                                   f"(see {self.run_dir / (srv.name + '.log')})")
                if time.monotonic() > deadline:
                    raise RunError(f"server {srv.name} did not start within {timeout:.0f} s")
                time.sleep(0.02)
            info = json.loads(addr.read_text())
            srv.host, srv.port = info["host"], info["port"]
        self.config.save(self.config_path)
        for srv in self.config.servers:
            ping(srv)

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
                failures.append(f"server {name} exited with status {code} "
                                f"(see {self.run_dir / (name + '.log')})")
        return failures


def ping(srv: ServerConfig, timeout: float = 5.0) -> str:
    """Ask a server for its name; raise :class:`RunError` if it does not answer."""
    try:
        sock = bmi.connect(srv.host, srv.port, timeout=timeout)
        try:
            sock.settimeout(timeout)
            bmi.send(sock, bmi.MODE_UNEXPECTED, 1, P.encode(P.PingRequest()))
            resp = P.decode(bmi.recv_expected(sock, 1))
        finally:
            sock.close()
    except (OSError, P.ProtocolError) as exc:
        raise RunError(f"server {srv.name} at {srv.host}:{srv.port} does not answer: {exc}") from None
    if not isinstance(resp, P.PingResponse) or resp.server != srv.name:
        raise RunError(f"server at {srv.host}:{srv.port} is not {srv.name}")
    return resp.server


def run(opts: RunOptions) -> RunResult:
    """Do one traced run; raise :class:`RunError` naming what failed."""
    t0 = time.monotonic()
    out = Path(opts.out)
    config = make_config(opts, out)
    out.mkdir(parents=True, exist_ok=True)
    parts = out / "parts"
    shutil.rmtree(parts, ignore_errors=True)
    parts.mkdir()
    run_dir = out / "servers"
    run_dir.mkdir(exist_ok=True)
    config_path = out / "fs.json"
    group = ServerGroup(config, config_path, run_dir)
    failures: list[str] = []
    stdout = ""
    try:
        group.start()
        stdout, failed = _run_ranks(opts, config_path, parts)
        failures += failed
    finally:
        failures += group.stop()
    # Even a failed run keeps what every rank and server flushed.
    meta_args = (opts.callid_layout, config.run_id, config.to_json(), opts.source)
    client = out / "client.parquet"
    server = out / "server.parquet"
    client_rows = combine_parts(sorted(parts.glob("client-*.parquet")), client, S.CLIENT_SCHEMA,
                                S.file_metadata(S.KIND_CLIENT, *meta_args))
    server_rows = combine_parts(sorted(parts.glob("server-*.parquet")), server, S.SERVER_SCHEMA,
                                S.file_metadata(S.KIND_SERVER, *meta_args))
    if failures:
        raise RunError("; ".join(failures) + f" (the events logged before are in {client} and {server})")
    return RunResult(out, client, server, client_rows, server_rows, time.monotonic() - t0, stdout)


def _run_ranks(opts: RunOptions, config_path: Path, parts: Path) -> tuple[str, list[str]]:
    """Run the ranks; their standard output (with ``opts.capture``) and what failed."""
    cmd = [find_mpiexec(), "-n", str(opts.np), sys.executable, "-m", opts.launcher, *opts.target]
    env = dict(os.environ, **{CONFIG_ENV: str(config_path.resolve())})
    stdout = (subprocess.PIPE if opts.capture else subprocess.DEVNULL if opts.quiet
              else sys.stderr.fileno() if opts.stdout_to_stderr else None)
    try:
        if opts.on_wait is None:
            proc = subprocess.run(cmd, env=env, timeout=opts.timeout, stdout=stdout, text=opts.capture)
        else:
            proc = _watched(cmd, env, stdout, opts)
    except subprocess.TimeoutExpired:
        return "", [f"ranks did not finish within {opts.timeout} s"]
    failed = sorted(parts.glob("rank-*.failed"), key=lambda p: int(p.stem.split("-")[1]))
    msgs = [f"rank {p.stem.split('-')[1]} failed: {p.read_text().strip()}" for p in failed]
    if proc.returncode and not msgs:
        msgs.append(f"mpiexec exited with status {proc.returncode}")
    return proc.stdout or "", msgs


def _watched(cmd: list[str], env: dict[str, str], stdout: Any,
             opts: RunOptions) -> subprocess.CompletedProcess:
    """``subprocess.run`` that calls ``opts.on_wait`` while the ranks run (for progress displays)."""
    deadline = None if opts.timeout is None else time.monotonic() + opts.timeout
    with subprocess.Popen(cmd, env=env, stdout=stdout, text=opts.capture) as proc:
        try:
            while True:
                try:
                    out, _ = proc.communicate(timeout=0.25)
                    break
                except subprocess.TimeoutExpired:
                    if deadline is not None and time.monotonic() > deadline:
                        raise
                    opts.on_wait()
        except BaseException:
            proc.kill()
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out or "", None)
