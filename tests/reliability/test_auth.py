"""Authentication on every server: a client proves it holds the file system's secret when it
connects; one that does not is refused with an error reply and logged, while the server keeps
serving a client that does.  The secret stays in its owner-only file."""

from __future__ import annotations

import os
import select
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest

from callid.mpiio.sysint import SysInt
from callid.server_wire import RunError, ping
from callid_core.config import Config
from callid_core.errors import InputError
from server_sim import bmi
from server_sim import protocol as P
from tests.reliability.servers import call, read_frame, start

READ, WRITE = P.IoType.READ, P.IoType.WRITE


def _served(group, errors: list[BaseException], rounds: list[int], stop: threading.Event) -> None:
    """An authenticated client writing and reading back until ``stop``."""
    client = SysInt(group.config, 1, lambda *a: None)
    try:
        f = client.create("/pvfs2/served", call(1), dfile_count=2)
        while not stop.is_set() or not rounds:
            data = os.urandom(200_000)
            region = [(len(rounds) * 4096, len(data))]
            client.io(f, WRITE, region, memoryview(data), call(2))
            back = bytearray(len(data))
            client.io(f, READ, region, memoryview(back), call(3, "MPI_File_read_at"))
            if back != data:
                raise AssertionError("read back other bytes")
            rounds.append(1)
    except BaseException as exc:  # noqa: BLE001 (checked by the test)
        errors.append(exc)
    finally:
        client.close()


def test_clients_without_the_secret_are_refused_and_logged_while_one_with_it_is_served(tmp_path):
    group = start(tmp_path, servers=2)
    secret = group.config.secret()
    errors: list[BaseException] = []
    rounds: list[int] = []
    stop = threading.Event()
    served = threading.Thread(target=_served, args=(group, errors, rounds, stop))
    served.start()
    try:
        for srv in group.config.servers:
            # a client that sends a request without the handshake: an EACCES reply, then the close
            sock = bmi.connect(srv.host, srv.port)
            bmi.send(sock, bmi.MODE_UNEXPECTED, 42, P.encode(P.LookupRequest(path="/pvfs2/served")))
            mode, _, hello = read_frame(sock, 10)
            assert mode == bmi.MODE_AUTH and bmi.HELLO.unpack(hello)[0] == 0
            mode, tag, payload = read_frame(sock, 10)
            reply = P.decode(payload)
            assert (mode, tag, type(reply), reply.status) == (bmi.MODE_EXPECTED, 42, P.ErrorResponse,
                                                              P.Status.EACCES)
            assert read_frame(sock, 10) is None
            sock.close()
            # a client with another secret: refused in the handshake
            with pytest.raises(bmi.BmiError, match="refused the connection: Permission denied"):
                bmi.connect(srv.host, srv.port, timeout=10, secret=os.urandom(32))
            with pytest.raises(RunError, match="Permission denied"):
                ping(srv, os.urandom(32))
            assert ping(srv, secret) == srv.name
    finally:
        stop.set()
        served.join(60)
        failures = group.stop()
    assert errors == [] and len(rounds) > 0
    assert failures == []
    for srv in group.config.servers:
        text = (group.run_dir / f"{srv.name}.log").read_text()
        assert text.count("refused the client at 127.0.0.1") == 3, text
        assert "sent a request without proving" in text and "proof is wrong" in text


def test_the_secret_is_its_owners_only_and_never_written_elsewhere(tmp_path):
    group = start(tmp_path)
    client = SysInt(group.config, 0, lambda *a: None)
    try:
        f = client.create("/pvfs2/logged", call(1))
        client.io(f, WRITE, [(0, 5)], memoryview(b"bytes"), call(2))
    finally:
        client.close()
        assert group.stop() == []
    path = tmp_path / "fs.secret"
    assert group.config.secret_file == str(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = group.config.secret()
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != path]
    assert any(p.suffix == ".parquet" for p in written) and any(p.suffix == ".log" for p in written)
    for p in written:
        raw = p.read_bytes()
        assert key.hex().encode() not in raw and key not in raw, p
    # a secret file others may read is refused, by the client and by a server
    path.chmod(0o644)
    with pytest.raises(InputError, match="must be its owner's only"):
        group.config.secret()
    fs_json = tmp_path / "fs.json"
    started = subprocess.run([sys.executable, "-m", "server_sim", "serve", "--config", str(fs_json),
                              "--name", Config.load(fs_json).io_servers[0].name],
                             capture_output=True, text=True, timeout=60)
    assert started.returncode == 2
    assert started.stderr.strip().splitlines() == [
        f"server_sim: cannot start server 'io0': {path}: the secret file must be its owner's only "
        "(mode 0600; it is 0644)"]


def test_a_handshake_sent_byte_by_byte_is_cut_at_its_total_time(tmp_path):
    """A client sending its proof one byte every 0.2 s (each byte within the idle timeout) is closed
    after the handshake's time in all (here the idle timeout, 1 s), not served forever."""
    group = start(tmp_path, idle_timeout=1.0)
    srv = group.config.io_servers[0]
    try:
        sock = socket.create_connection((srv.host, srv.port), timeout=10)
        assert read_frame(sock, 10)[0] == bmi.MODE_AUTH  # (its hello)
        started = time.monotonic()
        closed = None
        for byte in bmi.FRAME.pack(bmi.BMI_MAGIC, bmi.MODE_AUTH, 0, bmi.PROOF.size) + bytes(bmi.PROOF.size):
            try:
                sock.send(bytes([byte]))
            except OSError:
                closed = time.monotonic() - started
                break
            time.sleep(0.2)
            if read_ready(sock) and not sock.recv(1):  # (the server closed it)
                closed = time.monotonic() - started
                break
        sock.close()
        assert closed is not None and closed < 3.0, closed
        assert ping(srv, group.config.secret()) == srv.name
    finally:
        assert group.stop() == []
    assert "did not prove it holds the file system's secret within 1 s" in \
        (group.run_dir / f"{srv.name}.log").read_text()


def test_a_flood_of_wrong_handshakes_logs_a_few_lines(tmp_path):
    group = start(tmp_path)
    srv = group.config.io_servers[0]
    try:
        for _ in range(500):
            with pytest.raises(bmi.BmiError, match="Permission denied"):
                bmi.connect(srv.host, srv.port, timeout=10, secret=os.urandom(32))
        assert ping(srv, group.config.secret()) == srv.name
    finally:
        assert group.stop() == []
    text = (group.run_dir / f"{srv.name}.log").read_text()
    assert text.count("refused the client") == 10 + 5  # the first ten, then one in a hundred
    assert "(500 refused so far)" in text


def read_ready(sock: socket.socket) -> bool:
    return bool(select.select([sock], [], [], 0)[0])
