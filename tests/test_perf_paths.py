"""The fast paths keep their meaning: columnar log batches, lock-free stamping, scatter receives,
the single-thread client driver and the switches that exist only to measure logging."""

from __future__ import annotations

import socket
import threading

import pytest

from callid.mpiio import sysint as SI
from callid.mpiio.record import Record
from callid.trace import ClientTrace
from callid_core.config import Config, ServerConfig
from server_sim import bmi
from server_sim.events import ServerEvents

SENTINEL = (1 << 64) - 1


def test_events_and_trace_switched_off_log_nothing(tmp_path):
    config = Config(run_id="r", servers=[ServerConfig("io0", ["io"], str(tmp_path))], trace_dir=str(tmp_path),
                    callid_layout="64/23", server_events=False)
    events = ServerEvents(config, "io0")
    events.record(events.new_id(), "req", "io_write", events.who({"callid": [5]}), -1, 1, 0, 10, 1, 2)
    events.close()
    trace = ClientTrace(tmp_path, 0, "64/23", "r", enabled=False)
    trace.call(Record(5, func="MPI_File_write_at", file="/pvfs2/f", size=4, t_start=1, t_end=2))
    trace.rpc([5], "MPI_File_write_at", "io0", "io", 1, 1, 2, None, None, None)
    trace.close()
    assert list(tmp_path.glob("*.parquet")) == []


def test_scatter_receive_fills_every_piece_and_checks_the_frame_first():
    a, b = socket.socketpair()
    try:
        payload = bytes(range(256)) * 40
        framed = b"".join(bytes(v) for v in bmi.frame(bmi.MODE_EXPECTED, 9, payload))
        chunks = [framed[i:i + 1000] for i in range(0, len(framed), 1000)]
        sender = threading.Thread(target=lambda: [a.sendall(c) for c in chunks])
        sender.start()
        pieces = [bytearray(1), bytearray(4000), bytearray(len(payload) - 4001)]
        bmi.recv_expected_into(b, 9, *map(memoryview, pieces))
        sender.join()
        assert b"".join(pieces) == payload
        # a message of another size is refused at its header, without waiting for the expected bytes
        a.sendall(b"".join(bytes(v) for v in bmi.frame(bmi.MODE_EXPECTED, 9, b"short")))
        with pytest.raises(bmi.BmiError, match="size 5"):
            bmi.recv_expected_into(b, 9, memoryview(bytearray(100)))
    finally:
        a.close()
        b.close()


def _framed(tag: int, payload: bytes) -> bytes:
    return b"".join(bytes(v) for v in bmi.frame(bmi.MODE_EXPECTED, tag, payload))


def test_one_call_receives_a_response_and_the_buffers_behind_it_or_a_short_error():
    a, b = socket.socketpair()
    try:
        ack, data = bytes(range(64)), bytes(range(256)) * 300
        stream = _framed(4, ack) + _framed(4, data[:50000]) + _framed(4, data[50000:])
        sender = threading.Thread(target=lambda: [a.sendall(stream[i:i + 999])
                                                  for i in range(0, len(stream), 999)])
        sender.start()
        raw, first, second = bytearray(64), bytearray(20000), bytearray(len(data) - 20000)
        views = [memoryview(first), memoryview(second)]
        n = bmi.recv_messages_into(b, 4, [[memoryview(raw)], [views[0], views[1][:30000]],
                                          [views[1][30000:]]], short_first=True)
        sender.join()
        assert (n, bytes(raw), bytes(first + second)) == (64, ack, data)
        # a shorter first message (an error response) is all there is: nothing more is read
        a.sendall(_framed(4, b"e" * 44))
        raw = bytearray(64)
        assert bmi.recv_messages_into(b, 4, [[memoryview(raw)], [memoryview(bytearray(10))]],
                                      short_first=True) == 44
        assert bytes(raw[:44]) == b"e" * 44
        # ... unless more follows it: then the framing is lost, and said so
        a.sendall(_framed(4, b"e" * 44) + _framed(4, b"x" * 10))
        with pytest.raises(bmi.BmiError, match="more data behind"):
            bmi.recv_messages_into(b, 4, [[memoryview(bytearray(64))], [memoryview(bytearray(10))]],
                                   short_first=True)
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("size", [0, 10, 64, 100, 5000])
def test_a_response_of_any_size_arrives_whole_with_an_expected_size(size):
    a, b = socket.socketpair()
    try:
        payload = bytes(i % 251 for i in range(size))
        a.sendall(_framed(8, payload))
        assert bytes(bmi.recv_expected(b, 8, expect=64)) == payload
        a.sendall(_framed(9, payload))
        with pytest.raises(bmi.BmiError, match="tag 9"):
            bmi.recv_expected(b, 8, expect=64)
    finally:
        a.close()
        b.close()


class _FakeConn:
    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.lock = sock, threading.Lock()


def test_the_driver_runs_every_job_to_its_end_then_raises_the_first_failure():
    config = Config(run_id="r", servers=[ServerConfig(n, ["io"], "/nonexistent", port=1) for n in "abc"],
                    trace_dir="/nonexistent", callid_layout="64/23")
    client = SI.SysInt(config, 0, lambda *a: None)
    pairs = {name: socket.socketpair() for name in "ab"}
    client._conns = {name: _FakeConn(ours) for name, (ours, _) in pairs.items()}
    done = []

    def failing():
        yield SI.MORE
        raise SI.FsError(5, "server a failed")

    def answered():
        yield SI.WAIT  # readable: the peer has answered
        done.append(pairs["b"][0].recv(1))
        return "ok"

    pairs["b"][1].sendall(b"!")
    try:
        with pytest.raises(SI.FsError, match="server a failed"):
            client._parallel([("a", failing()), ("b", answered())])
        assert done == [b"!"]
        assert client._parallel([("b", iter(()))]) == [None]
        assert not any(c.lock.locked() for c in client._conns.values())
    finally:
        for ours, theirs in pairs.values():
            ours.close()
            theirs.close()


@pytest.mark.parametrize("baseline", ["raw", "floor"])
def test_the_fs_benchmark_baselines_move_real_bytes(baseline, tmp_path):
    """``bench fs``'s baselines run to their end (the floor checks what it reads back; any
    failed process is an error, not a figure)."""
    from bench import fs

    write, read = getattr(fs, baseline)(2, 2, 64 * 1024, 256 * 1024, 4, tmp_path)
    assert write > 0 and read > 0
    assert list(tmp_path.iterdir()) == []  # the datafiles are removed
