"""The findings of the reliability issue against real servers: each request that once crashed a
server, lost other clients' events or took unbounded memory, threads or time, now answered or
refused while the server keeps serving everyone else."""

from __future__ import annotations

import errno
import os
import resource
import signal
import socket
import threading
import time

import pyarrow.parquet as pq
import pytest

from callid.mpiio.sysint import FsError, SysInt
from callid.server_wire import RunError, ping
from server_sim import bmi
from server_sim import protocol as P
from server_sim.server import SHUTDOWN_GRACE
from tests.reliability.servers import ask, call, connect, read_frame, start, status, wait_until

MiB = 1 << 20
READ, WRITE = P.IoType.READ, P.IoType.WRITE


def _events(group, server: str) -> list[dict]:
    parts = sorted((group.run_dir.parent / "parts").glob(f"server-{server}.*.parquet"))
    return [row for part in parts for row in pq.read_table(part).to_pylist()]


def test_out_of_range_values_are_refused_and_no_other_clients_event_is_lost(tmp_path):
    """A rank of 2^31 (an int32 column) or an offset of 2^63 once went into the event buffer, and
    the next flush lost the buffer's 4,096 events and an innocent client's reply; a bad row left
    unflushed at shutdown made the server exit 1 with its whole log lost."""
    group = start(tmp_path)
    io = group.config.io_servers[0]
    bad = [
        P.GetsizeRequest(handle=5, hints={"rank": 1 << 31}),
        P.GetsizeRequest(handle=5, hints={"rank": -(1 << 31) - 1}),
        P.SmallIoRequest(handle=5, io_type=WRITE, strip_size=65536, regions=[(1 << 63, 4)], data=b"abcd"),
        P.IoRequest(handle=5, io_type=READ, strip_size=65536, regions=[((1 << 63) - 2, 4)]),
        P.TruncateRequest(handle=5, size=1 << 63),
        P.IoRequest(handle=5, io_type=7, strip_size=65536, regions=[(0, 4)]),
        P.SmallIoRequest(handle=5, io_type=(1 << 32) - 1, strip_size=65536, regions=[(0, 4)]),
        P.CreateRequest(path="/pvfs2/x", strip_size=1 << 63),
        # what the command line would refuse: names that are not a file's path, a strip of 1 byte
        *(P.CreateRequest(path=path) for path in [
            "", "/", "a\0b", "/pvfs2/a\0b", "../../etc/passwd", "/pvfs2/../etc/passwd", "/pvfs2//x",
            "/pvfs2/" + "x" * 15_000, "/" + "x/" * 2100 + "x"]),
        P.LookupRequest(path="/pvfs2/./x"), P.RemoveRequest(path="x"), P.GetattrRequest(path=""),
        P.CreateRequest(path="/pvfs2/x", strip_size=1),
        P.IoRequest(handle=5, io_type=READ, strip_size=1, regions=[(0, 4)]),
    ]
    client = SysInt(group.config, 3, lambda *a: None)
    written = []
    try:
        sock, meta = connect(group, io), connect(group, group.config.meta_server)
        for tag, msg in enumerate(bad, 1):
            reply = ask(meta if "path" in vars(msg) else sock, tag, msg)
            assert isinstance(reply, P.ErrorResponse), msg
            assert (reply.status, reply.op) == (P.Status.EINVAL, msg.OP)
        assert isinstance(ask(sock, 99, P.PingRequest()), P.PingResponse)
        f = client.create("/pvfs2/innocent", call(1 << 41, "MPI_File_open"), dfile_count=1)
        data = memoryview(os.urandom(4096))
        for i in range(2500):  # (each a small I/O: two events; a flush every 4,096)
            callid = (2 << 41) | (i + 1)
            client.io(f, WRITE, [(i * 4096, 4096)], data, call(callid))
            written.append(callid)
        reply = ask(sock, 100, P.GetsizeRequest(handle=5, hints={"rank": 1 << 40}))  # (then the stop)
        assert reply.status == P.Status.EINVAL
        sock.close()
        meta.close()
    finally:
        client.close()
        failures = group.stop()
    assert failures == []  # (every server exited 0)
    rows = _events(group, io.name)
    trove = [r for r in rows if r["layer"] == "trove" and r["callid"] in set(written)]
    reqs = [r for r in rows if r["layer"] == "req" and r["callid"] in set(written)]
    assert (len(trove), len(reqs)) == (2500, 2500)
    assert not [r for r in rows if r["handle"] == 5]  # (a refused request leaves no event)


def test_a_terabyte_read_is_refused_at_once_and_a_long_flow_holds_one_batch(tmp_path):
    """A ~100-byte request for a 1 TiB region once cost 33 s of CPU and 5 GB of memory, held
    afterwards by a cache of flow buffers."""
    group = start(tmp_path, max_flow=64 * MiB)
    io = group.config.io_servers[0]
    pid = group.procs[io.name].pid
    client = SysInt(group.config, 0, lambda *a: None)
    try:
        sock = connect(group, io)
        assert isinstance(ask(sock, 9, P.CreateDfileRequest(handle=9)), P.EmptyResponse)
        before = status(pid)["VmHWM"]
        t0 = time.monotonic()
        for tag, cls in enumerate((P.IoRequest, P.SmallIoRequest, P.IoRequest), 1):
            io_type = WRITE if tag == 3 else READ
            reply = ask(sock, tag, cls(handle=9, io_type=io_type, strip_size=65536, regions=[(0, 1 << 40)]))
            assert (type(reply), reply.status) == (P.ErrorResponse, P.Status.E2BIG)
        assert time.monotonic() - t0 < 2
        # a read of exactly the configured flow length (a hole of 64 MiB) is served, one batch at a time
        f = client.create("/pvfs2/hole", call(1), dfile_count=1)
        client.truncate(f, 64 * MiB, call(2))
        back = bytearray(64 * MiB)
        assert client.io(f, READ, [(0, 64 * MiB)], memoryview(back), call(3)) == 64 * MiB
        # more than one request may move: the client sends two (reading up to the end of the file)
        more = bytearray(64 * MiB + 4096)
        assert client.io(f, READ, [(0, len(more))], memoryview(more), call(4)) == 64 * MiB
        grown = status(pid)["VmHWM"] - before
        print(f"peak RSS of {io.name}: {before / 1024:.0f} MiB before, +{grown / 1024:.1f} MiB after a 1 TiB "
              "request and a 64 MiB read")
        assert grown < 24 * 1024  # kB: a read batch and its frames, not the 64 MiB
        assert isinstance(ask(sock, 9, P.PingRequest()), P.PingResponse)
    finally:
        client.close()
        assert group.stop() == []


def test_frames_announced_big_and_never_sent_allocate_nothing(tmp_path):
    """100 connections announcing 16 MiB frames and sending nothing once made a server go from
    65 MB to 1.7 GB."""
    group = start(tmp_path)
    io = group.config.io_servers[0]
    pid = group.procs[io.name].pid
    socks = []
    try:
        before, base = status(pid)["VmRSS"], status(pid)["Threads"]
        for i in range(100):
            sock = connect(group, io)
            mode = bmi.MODE_EXPECTED if i % 2 else bmi.MODE_UNEXPECTED
            sock.sendall(bmi.FRAME.pack(bmi.BMI_MAGIC, mode, i, bmi.MESSAGE_LIMIT))
            socks.append(sock)
        for i in range(50):  # ... and before proving anything
            sock = socket.create_connection((io.host, io.port))
            sock.sendall(bmi.FRAME.pack(bmi.BMI_MAGIC, bmi.MODE_UNEXPECTED, i, bmi.MESSAGE_LIMIT))
            socks.append(sock)
        time.sleep(1)
        now = status(pid)
        print(f"{io.name}: RSS {before / 1024:.0f} MiB before, {now['VmRSS'] / 1024:.0f} MiB with 150 "
              f"connections announcing 16 MiB each; {now['Threads']} threads")
        assert now["VmRSS"] - before < 32 * 1024
        assert now["Threads"] <= base + 100
        assert ping(io, group.config.secret()) == io.name
    finally:
        for sock in socks:
            sock.close()
        assert group.stop() == []


def _hellos(socks: list[socket.socket]) -> list[int | None]:
    """The status of each connection's hello (None: none came)."""
    found = []
    for sock in socks:
        try:
            frame = read_frame(sock, 5)
        except OSError:
            frame = None
        found.append(None if frame is None else bmi.HELLO.unpack(frame[2])[0])
    return found


def test_300_idle_connections_beyond_the_limit_are_refused_and_idle_ones_closed(tmp_path):
    """271 idle connections once killed an I/O server: no limit, no idle timeout, a thread each."""
    group = start(tmp_path, max_connections=100, idle_timeout=2.0)
    io = group.config.io_servers[0]
    pid = group.procs[io.name].pid
    idle = []
    base = status(pid)["Threads"]
    try:
        idle = [socket.create_connection((io.host, io.port)) for _ in range(300)]
        hellos = _hellos(idle)
        assert (hellos.count(0), hellos.count(errno.EAGAIN)) == (100, 200)
        assert status(pid)["Threads"] <= base + 100
        with pytest.raises(RunError, match="Resource temporarily unavailable"):
            ping(io, group.config.secret())
        # the idle ones are closed after the idle timeout: then the server serves again
        assert wait_until(lambda: status(pid)["Threads"] <= base, 10)
        assert ping(io, group.config.secret()) == io.name
        assert group.procs[io.name].poll() is None
    finally:
        for sock in idle:
            sock.close()
        assert group.stop() == []


def _answers(srv, secret: bytes) -> bool:
    try:
        return ping(srv, secret) == srv.name
    except RunError:
        return False


def test_out_of_file_descriptors_a_server_refuses_new_connections_and_keeps_serving(tmp_path):
    """accept() failing with EMFILE once ended the server."""
    group = start(tmp_path, max_connections=1000, idle_timeout=3.0)
    io = group.config.io_servers[0]
    pid = group.procs[io.name].pid
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (128, 128))
    idle = []
    try:
        idle = [socket.create_connection((io.host, io.port)) for _ in range(300)]
        hellos = _hellos(idle)
        print(f"{io.name} limited to 128 descriptors, 300 connections: {hellos.count(0)} served, "
              f"{hellos.count(errno.EMFILE)} refused (EMFILE), {hellos.count(None)} without a hello")
        assert 0 < hellos.count(0) < 128 and hellos.count(errno.EMFILE) > 150
        assert group.procs[io.name].poll() is None
        for sock in idle:
            sock.close()
        assert wait_until(lambda: _answers(io, group.config.secret()), 10)  # (once the backlog is drained)
    finally:
        for sock in idle:
            sock.close()
        assert group.stop() == []


def test_sigterm_while_busy_ends_the_server_in_bounded_time_with_its_log_flushed(tmp_path):
    """Under load both I/O servers once hung in shutdown, joining busy threads, and ignored SIGTERM."""
    group = start(tmp_path)
    io = group.config.io_servers[0]
    proc = group.procs[io.name]
    stop = threading.Event()
    done: list[int] = []

    def writer(rank: int) -> None:
        client = SysInt(group.config, rank, lambda *a: None)
        data = memoryview(os.urandom(MiB))
        try:
            f = client.create(f"/pvfs2/busy{rank}", call(1), dfile_count=1)
            for i in range(1, 1 << 20):
                if stop.is_set():
                    return
                callid = (rank << 41) | i
                client.io(f, WRITE, [(i % 64 * MiB, MiB)], data, call(callid))
                done.append(callid)
        except FsError:
            pass  # (the server stopped under it)
        finally:
            client.close()

    writers = [threading.Thread(target=writer, args=(rank,)) for rank in range(1, 4)]
    stuck = connect(group, io)  # a 1 GiB read whose bytes nobody reads: its thread blocks in send
    try:
        for thread in writers:
            thread.start()
        bmi.send(stuck, bmi.MODE_UNEXPECTED, 1, P.encode(P.IoRequest(
            handle=77, io_type=READ, strip_size=65536, regions=[(0, 1 << 30)])))
        assert wait_until(lambda: len(done) > 30, 30)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGTERM)  # (a second one while it stops changes nothing)
        code = proc.wait(timeout=4 * SHUTDOWN_GRACE)
        took = time.monotonic() - t0
    finally:
        stop.set()
        for thread in writers:
            thread.join(30)
        stuck.close()
        failures = group.stop()
    print(f"{io.name} stopped by SIGTERM under load in {took:.2f} s (exit {code}), {len(done)} writes done")
    assert code == 0 and took < SHUTDOWN_GRACE + 2
    assert failures == []
    finished = set(done)
    logged = {r["callid"] for r in _events(group, io.name) if r["layer"] == "req" and r["callid"] in finished}
    assert logged == finished  # (each write answered had its events flushed at the stop)


def test_a_client_idle_beyond_the_servers_timeout_goes_on_unnoticed(tmp_path):
    """A server closes a connection idle for ``idle_timeout``; the client replaces a connection idle
    for half of that before it uses it again (a rank computing between its I/O calls)."""
    group = start(tmp_path, idle_timeout=1.0)
    pid = group.procs[group.config.io_servers[0].name].pid
    client = SysInt(group.config, 0, lambda *a: None)
    # (the thread of the start's ping connection may not have ended yet: the count without it)
    first = status(pid)["Threads"]
    wait_until(lambda: status(pid)["Threads"] < first, 1.0)
    base = status(pid)["Threads"]
    try:
        f = client.create("/pvfs2/pause", call(1), dfile_count=1)
        client.io(f, WRITE, [(0, 5)], memoryview(b"first"), call(2))
        assert status(pid)["Threads"] == base + 2  # the connection's, and its log's timer (first event)
        assert wait_until(lambda: status(pid)["Threads"] == base + 1, 10)  # (the server closed it)
        client.io(f, WRITE, [(5, 6)], memoryview(b"second"), call(3))
        back = bytearray(11)
        assert client.io(f, READ, [(0, 11)], memoryview(back), call(4)) == 11 and back == b"firstsecond"
    finally:
        client.close()
        assert group.stop() == []
