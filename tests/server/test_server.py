"""The server stack as real processes: robustness, Trove operations, persistence."""

from __future__ import annotations

import itertools
import os
import random
import socket
import struct
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callid.mpiio.call import CallContext
from callid.mpiio.sysint import FsError, SysInt
from callid.server_wire import RunError, log_parts, ping, take_log_parts
from server_sim import bmi
from server_sim import protocol as P
from server_sim.distribution import SimpleStripe
from tests.conftest import start_servers

_ids = itertools.count(1)


def _raw(fs, srv) -> socket.socket:
    """A connection to ``srv`` of the file system ``fs`` that proved it holds its secret."""
    return bmi.connect(srv.host, srv.port, timeout=10, secret=fs.config.secret())


def _answer(sock: socket.socket, tag: int) -> P.Message:
    sock.settimeout(10)
    return P.decode(bmi.recv_expected(sock, tag))


def _ping_ok(sock: socket.socket) -> bool:
    bmi.send(sock, bmi.MODE_UNEXPECTED, 99, P.encode(P.PingRequest()))
    return isinstance(_answer(sock, 99), P.PingResponse)


def test_bad_requests_get_errors_and_the_server_keeps_serving(fs):
    srv = fs.config.io_servers[0]
    sock = _raw(fs, srv)
    # an unexpected message over 16 KiB: rejected, stream stays in sync
    big = P.encode(P.SmallIoRequest(data=b"x" * 20000))
    sock.sendall(bmi.FRAME.pack(bmi.BMI_MAGIC, bmi.MODE_UNEXPECTED, 5, len(big)) + big)
    assert _answer(sock, 5).status == P.Status.EMSGSIZE
    # garbage payload, unknown op, wrong version
    bmi.send(sock, bmi.MODE_UNEXPECTED, 6, b"\x01\x02\x03")
    garbage = _answer(sock, 6)
    assert isinstance(garbage, P.ErrorResponse) and garbage.status == P.Status.EPROTO and garbage.op == 0
    bad_op = bytearray(P.encode(P.PingRequest()))
    bad_op[8:12] = struct.pack("<I", 999)
    bmi.send(sock, bmi.MODE_UNEXPECTED, 7, bad_op)
    assert _answer(sock, 7).status == P.Status.EPROTO
    # requests on a datafile nobody created: refused, and no datafile is made
    write = P.IoRequest(handle=1, io_type=P.IoType.WRITE, strip_size=65536, regions=[(0, 10)])
    for tag, req in ((20, P.TruncateRequest(handle=1, size=1 << 40)), (21, P.GetsizeRequest(handle=1)),
                     (22, write)):
        bmi.send(sock, bmi.MODE_UNEXPECTED, tag, P.encode(req))
        assert _answer(sock, tag).status == P.Status.ENOENT
    bstreams = Path(srv.storage) / "bstreams"
    assert not (bstreams / f"{1:016x}.bstream").exists()
    bmi.send(sock, bmi.MODE_UNEXPECTED, 23, P.encode(P.CreateDfileRequest(handle=1)))
    assert isinstance(_answer(sock, 23), P.EmptyResponse) and (bstreams / f"{1:016x}.bstream").exists()
    # an I/O request naming a datafile outside its distribution
    bmi.send(sock, bmi.MODE_UNEXPECTED, 8, P.encode(P.IoRequest(
        handle=1, io_type=P.IoType.WRITE, strip_size=65536, dfile_nr=3, dfile_count=2,
        regions=[(0, 10)])))
    bad_dist = _answer(sock, 8)
    assert bad_dist.status == P.Status.EINVAL and bad_dist.op == P.Op.IO
    # an I/O request of an unknown I/O type; a reply sent as a request
    bmi.send(sock, bmi.MODE_UNEXPECTED, 13, P.encode(P.SmallIoRequest(io_type=7, strip_size=65536)))
    assert _answer(sock, 13).status == P.Status.EINVAL
    # a payload other than the file system's (it stores data: a request without is refused), or none
    for tag, payload in ((15, P.PayloadCode.NONE), (16, 7)):
        bmi.send(sock, bmi.MODE_UNEXPECTED, tag, P.encode(P.IoRequest(
            handle=1, io_type=P.IoType.WRITE, strip_size=65536, regions=[(0, 10)], payload=payload)))
        assert _answer(sock, tag).status == P.Status.EINVAL
    bmi.send(sock, bmi.MODE_UNEXPECTED, 14, P.encode(P.PingRequest().reply(server="me")))
    assert _answer(sock, 14).status == P.Status.ENOSYS
    # a known hint of the wrong type (a CallID list sent as one integer)
    wrong = P.encode(P.IoRequest(handle=1, io_type=P.IoType.READ, strip_size=65536, regions=[(0, 10)],
                                 hints={"callie": 5})).replace(b"callie", b"callid")
    bmi.send(sock, bmi.MODE_UNEXPECTED, 12, wrong)
    assert _answer(sock, 12).status == P.Status.EPROTO
    # an expected message with no request waiting for it
    bmi.send(sock, bmi.MODE_EXPECTED, 9, b"data")
    assert _answer(sock, 9).status == P.Status.EPROTO
    assert _ping_ok(sock)
    # broken framing: the connection is answered and closed, the server lives on
    sock.sendall(struct.pack("<IIQQ", 0xDEAD, 1, 10, 4) + b"abcd")
    assert _answer(sock, 10).status == P.Status.EPROTO
    sock.close()
    sock = _raw(fs, srv)
    sock.sendall(bmi.FRAME.pack(bmi.BMI_MAGIC, bmi.MODE_UNEXPECTED, 11, 1 << 30))
    assert _answer(sock, 11).status == P.Status.EPROTO
    sock.close()
    sock = _raw(fs, srv)
    assert _ping_ok(sock)
    sock.close()


def test_an_out_of_range_shared_pointer_is_refused_and_the_metadata_server_keeps_working(fs):
    """A handle or a pointer beyond int64 once left the metadata store inside a transaction, and every
    later create, remove and shared pointer request failed: now it is refused and nothing changes."""
    sock = _raw(fs, fs.config.meta_server)

    def shared_fp(tag: int, handle: int, delta: int, assign: int = 0) -> P.Message:
        bmi.send(sock, bmi.MODE_UNEXPECTED, tag, P.encode(P.SharedFpRequest(handle=handle, delta=delta,
                                                                            assign=assign)))
        return _answer(sock, tag)

    assert shared_fp(1, 1 << 63, 1).status == P.Status.EINVAL
    assert shared_fp(2, 77, (1 << 63) - 1, assign=1).previous == 0
    assert shared_fp(3, 77, 1).status == P.Status.EINVAL  # past int64
    assert shared_fp(4, 77, 0).previous == (1 << 63) - 1  # unchanged
    bmi.send(sock, bmi.MODE_UNEXPECTED, 5, P.encode(P.CreateRequest(path="/after-overflow")))
    assert isinstance(_answer(sock, 5), P.AttrResponse)
    assert _ping_ok(sock)
    sock.close()


class EventReader:
    """Reads the server event parts written since the last call."""

    def __init__(self, trace_dir: str) -> None:
        self.dir = Path(trace_dir)
        self.seen: set[Path] = set()
        self.rows: list[dict] = []

    def trove_ops(self, callid: int) -> list[tuple[str, str, int, int]]:
        for part in sorted(set(self.dir.glob("server-*.parquet")) - self.seen):
            self.seen.add(part)
            self.rows += pq.read_table(part).to_pylist()
        return sorted((r["server"], r["op"], r["offset"], r["size"]) for r in self.rows
                      if r["layer"] == "trove" and r["callid"] == callid)


def predicted_trove_ops(dist: SimpleStripe, servers: list[str], offset: int, length: int,
                        flow_buffer: int, small_limit: int, op: str) -> list[tuple[str, str, int, int]]:
    """simple_stripe shares, then one Trove operation per flow buffer (or one for small I/O)."""
    shares = [dist.share(n, offset, length) for n in range(dist.dfile_count)]
    small = 0 < max(n for _, n in shares) <= small_limit
    ops = []
    for server, (start, size) in zip(servers, shares):
        step = size if small else flow_buffer
        ops += [(server, op, start + i, min(step, size - i)) for i in range(0, size, step or 1)]
    return sorted(ops)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dfile_count=st.integers(1, 4), strip=st.sampled_from([4096, 10000, 32768, 65536, 200000]),
       offset=st.integers(0, 600_000), length=st.integers(1, 400_000), seed=st.integers(0, 2**32))
def test_trove_operations_equal_simple_stripe_plus_flow_splitting(fs, dfile_count, strip, offset,
                                                                  length, seed):
    config = fs.config
    reader = _reader(fs)
    client = _client(fs)
    path = f"/pvfs2/prop-{next(_ids)}"
    f = client.create(path, _call(_cid(), "MPI_File_open"), dfile_count=dfile_count, strip_size=strip)
    data = random.Random(seed).randbytes(length)
    write_id, read_id = _cid(), _cid()
    region = [(offset, length)]
    write = _call(write_id, "MPI_File_write_at")
    assert client.io(f, P.IoType.WRITE, region, memoryview(data), write) == length
    back = bytearray(length)
    assert client.io(f, P.IoType.READ, region, memoryview(back), _call(read_id, "MPI_File_read_at")) == length
    assert bytes(back) == data
    servers = [s for s, _ in f.dfiles]
    limit = min(config.small_io, P.SMALL_IO_MAX_DATA)
    for callid, op in ((write_id, "trove_write"), (read_id, "trove_read")):
        expect = predicted_trove_ops(f.dist, servers, offset, length, config.flow_buffer, limit, op)
        assert reader.trove_ops(callid) == expect


def test_reads_past_end_of_file_are_short_and_holes_read_as_zeros(fs):
    client = _client(fs)
    f = client.create("/pvfs2/holes", _call(_cid()), dfile_count=3, strip_size=4096)
    client.io(f, P.IoType.WRITE, [(20000, 100)], memoryview(b"z" * 100), _call(_cid()))
    buf = bytearray(30000)
    assert client.io(f, P.IoType.READ, [(0, 30000)], memoryview(buf), _call(_cid())) == 20100
    assert bytes(buf[:20000]) == bytes(20000) and bytes(buf[20000:20100]) == b"z" * 100
    assert client.getsize(f, _call(_cid())) == 20100
    client.truncate(f, 5000, _call(_cid()))
    assert client.getsize(f, _call(_cid())) == 5000
    with pytest.raises(FsError):
        client.lookup("/pvfs2/not-there", _call(_cid()))


def test_data_reads_back_identical_after_the_servers_restart(tmp_path):
    data = os.urandom(300_000)
    group = start_servers(tmp_path, servers=2)
    try:
        client = SysInt(group.config, 0, lambda *a: None)
        f = client.create("/pvfs2/keep", _call(1), dfile_count=2, strip_size=65536)
        client.io(f, P.IoType.WRITE, [(12345, len(data))], memoryview(data), _call(2))
        client.flush(f, _call(3))
        client.close()
    finally:
        assert group.stop() == []
    group = start_servers(tmp_path, servers=2)
    try:
        client = SysInt(group.config, 0, lambda *a: None)
        f = client.lookup("/pvfs2/keep", _call(4))
        back = bytearray(len(data))
        assert client.io(f, P.IoType.READ, [(12345, len(data))], memoryview(back), _call(5)) == len(data)
        assert bytes(back) == data
        client.close()
    finally:
        assert group.stop() == []


def test_a_servers_event_log_is_taken_over_the_wire_and_bad_names_are_refused(tmp_path):
    """log_flush writes the events so far as a part and lists the parts; log_read reads one from an
    offset; log_remove removes it; no other file is reachable; the requests leave no event."""
    group = start_servers(tmp_path, servers=1)
    try:
        srv, secret = group.config.io_servers[0], group.config.secret()
        client = SysInt(group.config, 0, lambda *a: None)
        f = client.create("/pvfs2/logged", _call(1), dfile_count=1, strip_size=65536)
        client.io(f, P.IoType.WRITE, [(0, 100_000)], memoryview(bytes(100_000)), _call(2))
        client.close()
        parts = log_parts(srv, secret)
        assert list(parts) == ["server-io0.000000.parquet"]
        on_disk = Path(group.config.trace_dir) / "server-io0.000000.parquet"
        assert parts["server-io0.000000.parquet"] == on_disk.stat().st_size
        events = pq.read_table(on_disk).to_pylist()
        assert {e["op"] for e in events} >= {"io_write", "trove_write"}
        sock = _raw(group, srv)
        try:
            for tag, name in enumerate(["../fs.json", str(on_disk), "server-io1.000000.parquet",
                                        "server-io0.000007.parquet", "server-io0.000000.parquet/"], 10):
                bmi.send(sock, bmi.MODE_UNEXPECTED, tag, P.encode(P.LogReadRequest(name=name)))
                assert _answer(sock, tag).status == P.Status.ENOENT, name
            for tag, offset in ((20, 100), (21, 1 << 40)):
                bmi.send(sock, bmi.MODE_UNEXPECTED, tag, P.encode(P.LogReadRequest(name=on_disk.name,
                                                                                   offset=offset)))
                assert bytes(_answer(sock, tag).data) == on_disk.read_bytes()[offset:]
        finally:
            sock.close()
        expected = on_disk.read_bytes()
        take_log_parts(srv, secret, parts, tmp_path)
        assert (tmp_path / on_disk.name).read_bytes() == expected and not on_disk.exists()
        (tmp_path / "again").mkdir()
        with pytest.raises(RunError, match="refused a log_read request \\(ENOENT\\)"):
            take_log_parts(srv, secret, parts, tmp_path / "again")
        assert list((tmp_path / "again").iterdir()) == []
        # (the log requests left no event: the next part holds none)
        assert log_parts(srv, secret) == {} and ping(srv, secret) == "io0"
    finally:
        assert group.stop() == []


def test_list_io_takes_at_most_64_regions_per_request_and_reads_back(fs):
    client, reader = _client(fs), _reader(fs)
    f = client.create("/pvfs2/strided", _call(_cid()), dfile_count=2, strip_size=65536)
    regions = [(i * 1000, 100) for i in range(150)]  # 66 regions on one datafile, 84 on the other
    data = bytes(i * 7 % 256 for i in range(15000))
    wid, rid = _cid(), _cid()
    assert client.io(f, P.IoType.WRITE, regions, memoryview(data), _call(wid)) == 15000
    back = bytearray(15000)
    assert client.io(f, P.IoType.READ, regions, memoryview(back), _call(rid)) == 15000
    assert bytes(back) == data
    reader.trove_ops(wid)  # read what is flushed so far
    reqs = [r for r in reader.rows if r["layer"] == "req" and r["callid"] == wid]
    per_server = {}
    for r in reqs:
        per_server[r["server"]] = per_server.get(r["server"], 0) + 1
    touching = {n: sum(1 for off, k in regions if f.dist.share(n, off, k)[1]) for n in range(2)}
    assert per_server == {f.dfiles[n][0]: -(-touching[n] // P.MAX_IO_REGIONS) for n in range(2)}
    whole = bytearray(150 * 1000)
    client.io(f, P.IoType.READ, [(0, len(whole))], memoryview(whole), _call(_cid()))
    assert all(whole[o:o + k] == data[i * 100:(i + 1) * 100] for i, (o, k) in enumerate(regions))
    assert whole[100:1000] == bytes(900)


def _cid() -> int:
    return (7 << 41) | next(_ids)


def _call(callid: int, func: str = "f") -> CallContext:
    return CallContext((callid,), func)


_state: dict = {}


def _client(fs) -> SysInt:
    if _state.get("fs") is not fs:
        _state.clear()
        _state.update(fs=fs, client=SysInt(fs.config, 7, lambda *a: None),
                      reader=EventReader(fs.config.trace_dir))
    return _state["client"]


def _reader(fs) -> EventReader:
    _client(fs)
    return _state["reader"]


def test_a_read_of_several_batches_reads_back_with_one_trove_op_per_buffer(fs):
    """A read flow sends its buffers in batches of bmi.FLOW_BATCH bytes: here three batches,
    the last one partial, on one datafile (32 KiB buffers)."""
    from server_sim.bmi import FLOW_BATCH

    client, reader = _client(fs), _reader(fs)
    f = client.create("/pvfs2/batches", _call(_cid()), dfile_count=1, strip_size=65536)
    length = 2 * FLOW_BATCH + 17 * fs.config.flow_buffer + 1234
    data = random.Random(7).randbytes(length)
    client.io(f, P.IoType.WRITE, [(999, length)], memoryview(data), _call(_cid()))
    back, read_id = bytearray(length + 5000), _cid()
    assert client.io(f, P.IoType.READ, [(999, length + 5000)], memoryview(back), _call(read_id)) == length
    assert bytes(back[:length]) == data and bytes(back[length:]) == bytes(5000)
    expect = predicted_trove_ops(f.dist, [f.dfiles[0][0]], 999, length + 5000, fs.config.flow_buffer,
                                 min(fs.config.small_io, P.SMALL_IO_MAX_DATA), "trove_read")
    assert reader.trove_ops(read_id) == expect


def test_a_server_under_a_low_descriptor_limit_serves_fewer_connections_rather_than_run_out():
    """With 128 descriptors (and no way to raise the limit) a server takes at most 48 connections
    and keeps 16 datafiles open: beyond, a connection is refused before a descriptor runs out."""
    import subprocess
    import sys

    code = ("import resource; resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128)); "
            "from server_sim.server import _descriptors; print(_descriptors(256, 256))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "(48, 16)", done.stderr
    assert "128 file descriptors: at most 48 connections and 16 open datafiles" in done.stderr
