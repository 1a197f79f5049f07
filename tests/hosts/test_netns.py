"""Servers on other hosts: two network namespaces joined to this one by veth pairs, made by the test
(root and iproute2's ``ip netns``; skipped otherwise, unless ``CALLID_REQUIRE_NETNS`` is set, as CI
does).  meta0 and io0 run in the first, io1 in the second; the ranks run here.  Data written reads
back, across runs; every server's log reaches the run; a client without the secret is refused while
the servers go on serving; a server killed in the middle of a run is named in the run's one-line error.
"""

from __future__ import annotations

import json
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from callid.server_wire import RunError, ping
from callid_core.config import Config
from server_sim import bmi
from server_sim import protocol as P
from tests.conftest import CALLID, ROOT, callid_cmd, query
from tests.reliability.servers import read_frame

PROGRAM = Path(__file__).with_name("program.py")
REQUIRE = os.environ.get("CALLID_REQUIRE_NETNS")


@dataclass
class Host:
    """A network namespace and its address, reached from here through a veth pair."""

    netns: str
    address: str

    def callid(self, *args: str) -> subprocess.CompletedProcess:
        """The ``callid`` command, run inside this host's namespace."""
        return subprocess.run(["ip", "netns", "exec", self.netns, CALLID, *map(str, args)],
                              capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)))


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _free_subnet() -> int:
    """A second octet ``x`` with no route to ``10.x.0.0/16`` here."""
    routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True).stdout
    used = {int(m) for m in re.findall(r"\b10\.(\d+)\.", routes)}
    return random.choice([x for x in range(100, 250) if x not in used])


@pytest.fixture(scope="module")
def hosts() -> Iterator[list[Host]]:
    """Two namespaces, each with one end of a veth pair (10.x.i.2), the other end here (10.x.i.1).
    Always removed, with whatever still runs in them."""
    why = ("needs root" if os.geteuid() != 0 else "needs iproute2's ip" if shutil.which("ip") is None
           else None)
    if why:
        (pytest.fail if REQUIRE else pytest.skip)(f"network namespaces {why} (ip netns)")
    tag = f"cl{os.getpid() % 100000}{secrets.token_hex(2)}"  # (interface names: at most 15 characters)
    x = _free_subnet()
    made: list[tuple[str, str]] = []
    made_hosts = []
    try:
        for i in (1, 2):
            netns, here, there = f"{tag}n{i}", f"{tag}h{i}", f"{tag}p{i}"
            _ip("netns", "add", netns)
            made.append((netns, here))
            _ip("link", "add", here, "type", "veth", "peer", "name", there)
            _ip("link", "set", there, "netns", netns)
            _ip("addr", "add", f"10.{x}.{i}.1/24", "dev", here)
            _ip("link", "set", here, "up")
            _ip("-n", netns, "addr", "add", f"10.{x}.{i}.2/24", "dev", there)
            _ip("-n", netns, "link", "set", there, "up")
            _ip("-n", netns, "link", "set", "lo", "up")
            made_hosts.append(Host(netns, f"10.{x}.{i}.2"))
    except subprocess.CalledProcessError as exc:
        _remove(made)
        (pytest.fail if REQUIRE else pytest.skip)(
            f"cannot make network namespaces: {' '.join(exc.cmd)}: {exc.stderr.strip()}")
    try:
        yield made_hosts
    finally:
        _remove(made)


def _remove(made: list[tuple[str, str]]) -> None:
    """Kill what runs in the namespaces (the servers this module started), remove them and their links."""
    for netns, here in made:
        pids = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ValueError, OSError):
                pass
        subprocess.run(["ip", "netns", "del", netns], capture_output=True)
        subprocess.run(["ip", "link", "del", here], capture_output=True)


@pytest.fixture(scope="module")
def fs(hosts, tmp_path_factory) -> Iterator[Path]:
    """A file system: meta0 and io0 in the first namespace, io1 in the second, started there."""
    a, b = hosts
    out = tmp_path_factory.mktemp("hosts") / "fs.json"
    made = callid_cmd("fs", "init", "--servers", f"{a.address}:io0,{b.address}:io1", "-o", out)
    assert made.returncode == 0, made.stderr
    try:
        for host, names in ((a, ["meta0", "io0"]), (b, ["io1"])):
            started = host.callid("servers", "start", "--config", out)
            assert started.returncode == 0, started.stderr
            assert [line.split()[1] for line in started.stdout.splitlines()] == names
        yield out
    finally:
        callid_cmd("servers", "stop", "--config", out)


def _run(fs: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    return callid_cmd("run", "--fs", fs, "-n", "2", "-d", out, PROGRAM, *args)


def test_the_servers_answer_here_and_start_only_where_their_address_is(fs, hosts):
    status = callid_cmd("servers", "status", "--config", fs, "--json")
    assert status.returncode == 0, status.stderr
    rows = {r["server"]: r for r in json.loads(status.stdout)}
    a, b = hosts
    assert {n: r["address"] for n, r in rows.items()} == {
        "meta0": f"{a.address}:3334", "io0": f"{a.address}:3335", "io1": f"{b.address}:3334"}
    assert all(r["answers"] and r["process"].startswith("process ") for r in rows.values())
    here = callid_cmd("servers", "start", "--config", fs)  # (no address of the root namespace)
    assert here.returncode == 1
    assert here.stderr.strip() == (f"callid: error: no server of the file system has an address of this host "
                                   f"(they are on {a.address}, {b.address}); start them on their hosts, or "
                                   "name them with --name")


@pytest.mark.mpi
@pytest.mark.slow
def test_data_written_reads_back_and_every_servers_log_reaches_the_run(fs, tmp_path):
    wrote = _run(fs, tmp_path / "w", "write", "/pvfs2/hosts")
    assert wrote.returncode == 0, wrote.stderr
    # Another run (the data stayed on the servers), from a host that does not see the servers'
    # directories (here: a configuration naming others): their logs come over the wire.
    config = Config.load(fs)
    for srv in config.servers:
        srv.home = str(tmp_path / "not-here" / srv.name)
    elsewhere = fs.with_name("elsewhere.json")
    config.save(elsewhere)
    read = _run(elsewhere, tmp_path / "r", "read", "/pvfs2/hosts")
    assert read.returncode == 0, read.stderr
    # (the two ranks' lines may arrive interleaved, even inside one line)
    assert all(f"rank {r}: read back OK" in read.stdout for r in (0, 1)), read.stdout
    for out, op in ((tmp_path / "w", "trove_write"), (tmp_path / "r", "trove_read")):
        events = pq.read_table(out / "server.parquet", columns=["server", "op"]).to_pylist()
        servers = {e["server"] for e in events}
        assert servers == {"meta0", "io0", "io1"}, out
        assert {e["server"] for e in events if e["op"] == op} == {"io0", "io1"}
    merged = callid_cmd("merge", tmp_path / "r" / "client.parquet", tmp_path / "r" / "server.parquet",
                        "-o", tmp_path / "r.duckdb")
    assert merged.returncode == 0, merged.stderr
    rows = query(tmp_path / "r.duckdb", "SELECT server, sum(share_bytes) FROM arrows WHERE server LIKE 'io%' "
                 "GROUP BY 1 ORDER BY 1")
    assert rows == [("io0", 256 * 1024), ("io1", 256 * 1024)]  # (2 ranks x 256 KiB in 64 KiB strips)
    assert not (tmp_path / "not-here").exists()
    # What a run collected is not collected again: each server's directory keeps no part of it.
    for srv in Config.load(fs).servers:
        assert list((Path(srv.home) / "parts").glob("server-*.parquet")) == []


def test_a_client_without_the_secret_is_refused_and_the_server_goes_on(fs):
    config = Config.load(fs)
    srv = config.server("io1")
    sock = bmi.connect(srv.host, srv.port, timeout=5)  # (no handshake: straight to a request)
    try:
        bmi.send(sock, bmi.MODE_UNEXPECTED, 7, P.encode(P.PingRequest()))
        mode, _, hello = read_frame(sock, 10)
        assert mode == bmi.MODE_AUTH and bmi.HELLO.unpack(hello)[0] == 0
        mode, tag, payload = read_frame(sock, 10)
        reply = P.decode(payload)
        assert (mode, tag, type(reply)) == (bmi.MODE_EXPECTED, 7, P.ErrorResponse)
        assert reply.status == P.Status.EACCES
        assert read_frame(sock, 10) is None  # (and disconnected)
    finally:
        sock.close()
    with pytest.raises(bmi.BmiError, match="refused the connection: Permission denied"):
        bmi.connect(srv.host, srv.port, timeout=5, secret=b"\x01" * 32)
    with pytest.raises(RunError, match=f"server io1 at {srv.host}:{srv.port} does not answer"):
        ping(srv, b"\x02" * 32)
    assert ping(srv, config.secret()) == "io1"  # (it goes on serving those that hold the secret)
    log = (Path(srv.home) / "io1.log").read_text()
    assert log.count("refused the client at 10.") >= 3


@pytest.mark.mpi
@pytest.mark.slow
def test_a_server_killed_in_a_run_is_named_in_one_line(fs, tmp_path):
    """(Last: io1 stays dead.)"""
    ready, go = tmp_path / "ready", tmp_path / "go"
    io1 = Config.load(fs).server("io1")
    run = subprocess.Popen([CALLID, "run", "--fs", str(fs), "-n", "2", "-d", str(tmp_path / "k"),
                            str(PROGRAM), "pause", "/pvfs2/killed", str(ready), str(go)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert run.poll() is None, run.communicate()
            assert time.monotonic() < deadline, "the ranks did not write"
            time.sleep(0.05)
        pid = json.loads((Path(io1.home) / "io1.addr").read_text())["pid"]
        os.kill(pid, signal.SIGKILL)
        while Path(f"/proc/{pid}/cmdline").exists() and Path(f"/proc/{pid}/cmdline").read_bytes():
            time.sleep(0.02)
        go.touch()
        _, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 1
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("callid: error: rank ") and "server io1" in last, stderr
    assert (f"server io1 at {io1.host}:{io1.port} does not answer: [Errno 111] Connection refused: its "
            "last events are not in this run's log") in last
    # The other servers' events of the run were still collected.
    servers = set(pq.read_table(tmp_path / "k" / "server.parquet", columns=["server"])["server"].to_pylist())
    assert {"meta0", "io0"} <= servers
    status = callid_cmd("servers", "status", "--config", fs)
    assert status.returncode == 1 and re.search(r"io1 .* does not answer", status.stdout)
