"""A protocol fuzzer against real servers (a metadata server and two I/O servers, started as
``callid run`` starts them): random requests of every class with values over their codecs'
whole ranges (the edges first), mutations of valid encodings, garbage and broken framing, sent
over authenticated connections, while an honest client writes and reads back.  Afterwards every
server answers, none restarted, their peak memory and threads stayed bounded, and the honest
client lost neither a byte nor an event.

About a minute (``CALLID_FUZZ_SECONDS``, default 45 s of fuzzing); ``-s`` prints the counts.
"""

from __future__ import annotations

import collections
import itertools
import os
import random
import socket
import struct
import threading
import time

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callid.mpiio.sysint import SysInt
from callid.server_wire import ping
from callid_core.choices import SERVER_LAYERS
from server_sim import bmi
from server_sim import protocol as P
from tests.reliability.servers import call, connect, read_frame, start, status

FUZZ_SECONDS = float(os.environ.get("CALLID_FUZZ_SECONDS", "45"))
#: Bounds the servers must stay within (a server idles at about 70 MiB: Python and pyarrow).
PEAK_RSS_KB = 400 * 1024
MAX_CONNECTIONS = 64
#: Seconds to wait for an answer (a broken frame, which may announce more bytes than it has, is
#: followed by the end of the connection: the server answers it or closes at once).
REPLY_WAIT = 2.0
HONEST_HANDLES = range(1 << 20, (1 << 20) + 100_000)  # (the metadata server's first handles)

EDGES = [0, 1, 2, 7, 8, 4095, 4096, 65535, 65536, 1 << 20, (1 << 31) - 1, 1 << 31, (1 << 32) - 1,
         1 << 32, 1 << 40, (1 << 62) + 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]
EDGES += [-e for e in EDGES[1:]] + [-(1 << 63)]


def ints(codec) -> st.SearchStrategy[int]:
    """Integers a codec carries, its edges and the edges of every narrower type often."""
    lo, hi = P.value_range(codec)
    return st.one_of(st.sampled_from([e for e in EDGES if lo <= e <= hi]), st.integers(lo, hi))


small = st.integers(0, 1 << 22)
handles = st.one_of(ints(P.U64), st.integers(1, 64)).filter(lambda h: h not in HONEST_HANDLES)
regions = st.lists(st.one_of(st.tuples(small, small), st.tuples(small, st.integers(0, 1 << 62)),
                             st.tuples(ints(P.U64), ints(P.U64))), max_size=70)
hints = st.fixed_dictionaries({}, optional={
    "callid": st.lists(ints(P.U64), max_size=6), "rank": ints(P.I64), "request_id": ints(P.I64),
    "callid_bytes": st.lists(st.one_of(st.integers(0, 8), ints(P.U64)), max_size=12),
    "note": st.text(max_size=20)})
FIELDS = {"handle": handles, "regions": regions, "strip_size": st.one_of(st.sampled_from([4096, 65536]),
                                                                          ints(P.U64)),
          "dfile_count": st.one_of(st.integers(0, 4), ints(P.U32)),
          "dfile_nr": st.one_of(st.integers(0, 4), ints(P.U32)),
          "io_type": st.one_of(st.integers(0, 1), ints(P.U32)),
          "size": st.one_of(small, ints(P.U64)), "delta": ints(P.I64), "assign": st.integers(0, 1),
          "exclusive": st.integers(0, 1),
          # an event mask: every layer (what an honest client's events need), or names that are none
          "layers": st.one_of(st.just(list(SERVER_LAYERS)),
                              st.lists(st.text(max_size=8).map(lambda t: "x" + t), min_size=1, max_size=6)),
          "query": ints(P.U32)}
CODECS = {id(P.STR): st.text(max_size=40).map(lambda t: "/pvfs2/fuzz/" + t),
          id(P.BYTES): st.binary(max_size=4096)}


def _field(name: str, codec) -> st.SearchStrategy:
    if name in FIELDS:
        return FIELDS[name]
    return CODECS[id(codec)] if id(codec) in CODECS else ints(codec)


requests = st.sampled_from(list(P.REQUESTS.values())).flatmap(lambda cls: st.builds(
    cls, **{name: _field(name, codec) for name, codec in P.wire_fields(cls) if name != "hints"}, hints=hints))


@st.composite
def mutated(draw) -> bytes:
    """A valid encoding with one of: a window overwritten with an edge value, a byte flipped, a cut,
    bytes added."""
    data = bytearray(P.encode(draw(requests)))
    how = draw(st.sampled_from(["edge", "flip", "cut", "add"]))
    at = draw(st.integers(0, len(data) - 1))
    if how == "edge":
        width = draw(st.sampled_from([4, 8]))
        value = draw(st.sampled_from(EDGES)) % (1 << 8 * width)
        data[at:at + width] = value.to_bytes(width, "little")
    elif how == "flip":
        data[at] ^= 1 << draw(st.integers(0, 7))
    elif how == "cut":
        del data[at:]
    else:
        data[at:at] = draw(st.binary(min_size=1, max_size=64))
    return bytes(data)


@st.composite
def broken_frame(draw) -> bytes:
    """A frame header of any mode, tag and size, with a payload of another size."""
    size = draw(st.one_of(st.integers(0, 1 << 14), st.sampled_from([bmi.UNEXPECTED_LIMIT + 1,
                                                                     bmi.MESSAGE_LIMIT, 1 << 40])))
    head = bmi.FRAME.pack(draw(st.sampled_from([bmi.BMI_MAGIC, bmi.BMI_MAGIC, 0xDEADBEEF])),
                          draw(st.integers(0, 5)), draw(ints(P.U64)), size)
    return head + draw(st.binary(max_size=256))


def _framed(payload: bytes, tag: int) -> bytes:
    return bmi.FRAME.pack(bmi.BMI_MAGIC, bmi.MODE_UNEXPECTED, tag, len(payload)) + payload


actions = st.tuples(st.sampled_from(["meta0", "io0", "io1"]), st.one_of(
    requests, mutated(), st.binary(max_size=300), broken_frame()))


class Fuzzer:
    """Sends actions over one authenticated connection per server, reads what answers them."""

    def __init__(self, group) -> None:
        self.group = group
        self.conns: dict[str, socket.socket] = {}
        self.tags = itertools.count(1)
        self.counts: collections.Counter[str] = collections.Counter()

    def _conn(self, name: str) -> socket.socket:
        if name not in self.conns:
            self.conns[name] = connect(self.group, self.group.config.server(name))
            self.counts["connections"] += 1
        return self.conns[name]

    def _drop(self, name: str) -> None:
        sock = self.conns.pop(name, None)
        if sock is not None:
            sock.close()

    def send(self, name: str, action: P.Request | bytes) -> None:
        tag = next(self.tags)
        if isinstance(action, P.Request):
            kind, wire = "request", _framed(P.encode(action), tag)
        elif action[:4] == struct.pack("<I", bmi.BMI_MAGIC) or action[:4] == struct.pack("<I", 0xDEADBEEF):
            kind, wire = "frame", action
        else:
            kind, wire = "mutated or garbage", _framed(action, tag)
        self.counts[kind] += 1
        self.counts["requests"] += 1
        sock = self._conn(name)
        try:
            sock.sendall(wire)
            if kind == "frame":
                sock.shutdown(socket.SHUT_WR)
            frame = read_frame(sock, REPLY_WAIT)
        except OSError:
            frame = None
        if frame is None:  # (closed, or no answer in time: a connection in an unknown state)
            self.counts["no reply"] += 1
            self._drop(name)
            return
        self.counts["replies"] += 1
        try:
            reply = P.decode(frame[2])
        except P.ProtocolError:
            reply = None
        if isinstance(reply, P.ErrorResponse):
            self.counts[f"error {P.Status(reply.status).name}"] += 1
        else:
            self.counts["answered"] += 1
        if kind == "frame" or reply is None or isinstance(reply, P.IoResponse):
            self._drop(name)  # (a flow's bytes may follow, or be awaited: start afresh)


def _honest(group, stop: threading.Event, done: collections.Counter, errors: list) -> None:
    """A client writing and reading back its own file while the fuzzer runs."""
    client = SysInt(group.config, 5, lambda *a: None)
    rng = random.Random(5)
    try:
        f = client.create("/pvfs2/honest", call((5 << 41) | 1, "MPI_File_open"), dfile_count=2)
        assert all(h in HONEST_HANDLES for _, h in f.dfiles)
        for i in itertools.count(2):
            if stop.is_set():
                return
            stop.wait(0.01)  # (the fuzzer shares this process)
            data = rng.randbytes(rng.choice([100, 4096, 100_000, 1 << 20]))
            region = [(rng.randrange(1 << 24), len(data))]
            client.io(f, P.IoType.WRITE, region, memoryview(data), call((5 << 41) | i))
            back = bytearray(len(data))
            client.io(f, P.IoType.READ, region, memoryview(back), call((6 << 41) | i, "MPI_File_read_at"))
            if back != data:
                raise AssertionError(f"the honest client read back other bytes at {region}")
            done["writes"] += 1
    except BaseException as exc:  # noqa: BLE001 (checked by the test)
        errors.append(exc)
    finally:
        client.close()


def _watch(group, stop: threading.Event, peaks: dict[str, dict[str, int]]) -> None:
    """The most threads and the peak RSS of each server, sampled."""
    while not stop.wait(0.1):
        for name, proc in group.procs.items():
            try:
                now = status(proc.pid)
            except OSError:
                continue
            mine = peaks.setdefault(name, {"VmHWM": 0, "Threads": 0})
            mine["VmHWM"] = max(mine["VmHWM"], now["VmHWM"])
            mine["Threads"] = max(mine["Threads"], now["Threads"])


@pytest.mark.slow
def test_fuzzed_requests_never_kill_hang_or_bloat_a_server(tmp_path):
    group = start(tmp_path, servers=2, max_connections=MAX_CONNECTIONS, idle_timeout=5.0)
    pids = {name: proc.pid for name, proc in group.procs.items()}
    base = max(status(pid)["Threads"] for pid in pids.values())  # (Python's and pyarrow's own)
    fuzzer = Fuzzer(group)
    stop = threading.Event()
    done: collections.Counter[str] = collections.Counter()
    errors: list[BaseException] = []
    peaks: dict[str, dict[str, int]] = {}
    threads = [threading.Thread(target=_honest, args=(group, stop, done, errors)),
               threading.Thread(target=_watch, args=(group, stop, peaks))]

    @settings(max_examples=100, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(actions, min_size=1, max_size=8))
    def fuzz(batch: list) -> None:
        for name, action in batch:
            fuzzer.send(name, action)
        dead = {name: proc.returncode for name, proc in group.procs.items() if proc.poll() is not None}
        assert not dead, f"servers died: {dead} (the last actions: {batch})"

    t0 = time.monotonic()
    try:
        for thread in threads:
            thread.start()
        while time.monotonic() - t0 < FUZZ_SECONDS:
            fuzz()
        for name in list(fuzzer.conns):
            fuzzer._drop(name)
        answers = {srv.name: ping(srv, group.config.secret()) for srv in group.config.servers}
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
        failures = group.stop()
    took = time.monotonic() - t0
    counts = dict(fuzzer.counts)
    print(f"\nfuzzed for {took:.0f} s: {counts['requests']} requests ({counts.get('request', 0)} decodable, "
          f"{counts.get('mutated or garbage', 0)} mutated or garbage, "
          f"{counts.get('frame', 0)} broken frames) "
          f"over {counts['connections']} connections; {counts['replies']} replies "
          f"({', '.join(f'{k}: {v}' for k, v in sorted(counts.items()) if k.startswith('error'))}; "
          f"answered {counts.get('answered', 0)}), {counts.get('no reply', 0)} without a reply")
    print(f"honest client: {done['writes']} writes read back; servers: " + ", ".join(
        f"{name} peak RSS {p['VmHWM'] / 1024:.0f} MiB, at most {p['Threads']} threads"
        for name, p in sorted(peaks.items())))
    assert answers == {name: name for name in answers}
    assert {name: proc.pid for name, proc in group.procs.items()} == pids  # (no restart)
    assert failures == []  # (every server exited 0 when stopped)
    assert errors == [] and done["writes"] > 0
    assert counts["replies"] > counts["requests"] // 2
    for p in peaks.values():
        assert p["VmHWM"] < PEAK_RSS_KB and p["Threads"] <= base + MAX_CONNECTIONS
    # the honest client's events are all in the logs
    rows = [r for part in sorted((tmp_path / "parts").glob("server-io*.parquet"))
            for r in pq.read_table(part, columns=["layer", "callid"]).to_pylist()]
    logged = {r["callid"] for r in rows if r["layer"] == "req" and r["callid"] >> 41 == 5}
    assert len(logged) >= done["writes"]
