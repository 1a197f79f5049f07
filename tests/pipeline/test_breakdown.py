"""The latency breakdown (``callid stats`` slowest calls, the shipped query ``latency_breakdown``) on a
small hand-made log of a two-phase collective write and an independent write, with the parts computed
by hand; and the ``phases`` table and ``rpcs.callids`` the merge makes of it."""

from __future__ import annotations

import duckdb
import pytest

from callid import api
from callid_core import schema as S
from pipeline.merge import merge
from pipeline.merged import open_merged
from pipeline.query import named_query, run_query
from pipeline.stats import render_stats
from tests.pipeline.test_merge import NONE, _write

X0, X1 = 0x00000005, 0x01000005  # the collective MPI_File_write_all: rank 0 (aggregator), rank 1
Y1 = 0x01000006  # rank 1's independent write_at afterwards
WRITE_ALL = "MPI_File_write_all"


def _call(callid, rank, func, t0, t1, coll_seq=None):
    return S.CLIENT.row(callid=callid, rank=rank, clock="host0", func=func, file="/pvfs2/f", fid=1,
                        collective=coll_seq is not None, coll_seq=coll_seq, t_start=t0, t_end=t1)


def _phase(callid, rank, phase, t0, t1, **extra):
    return S.CLIENT.row(callid=callid, rank=rank, clock="host0", kind="phase", func=WRITE_ALL, op=phase,
                        collective=True, t_start=t0, t_end=t1, **extra)


def _rpc(callids, rank, seq, server, t0, t1, func=WRITE_ALL):
    return S.CLIENT.row(callid=callids[0] if len(callids) == 1 else NONE, callids=callids, rank=rank,
                        clock="host0", kind="rpc", func=func, server=server, op="io", req_seq=seq,
                        t_start=t0, t_end=t1, t_recv=t0 + 1, t_send=t1 - 1)


def _op(server, layer, rank, req_id, event_id, t0, t1, callids):
    return S.SERVER.row(server=server, clock=server, layer=layer, op=layer + "_write", callid=NONE,
                        callids=callids, rank=rank, req_id=req_id, event_id=event_id, size=100,
                        t_start=t0, t_end=t1)


CLIENT_ROWS = [
    # rank 0, the aggregator: 1000-2000
    _call(X0, 0, WRITE_ALL, 1000, 2000, coll_seq=7),
    _phase(X0, 0, "plan", 1010, 1100),
    _phase(X0, 0, "exchange", 1100, 1300, bytes=0),
    _phase(X0, 0, "io", 1300, 1800, offset=0, size=400, bytes=400),
    _phase(X0, 0, "wait", 1800, 1950),
    _rpc([X0, X1], 0, 1, "io0", 1400, 1700),
    _rpc([X0, X1], 0, 2, "io1", 1500, 1750),
    # rank 1: 1050-2010, waits for the aggregator
    _call(X1, 1, WRITE_ALL, 1050, 2010, coll_seq=7),
    _phase(X1, 1, "plan", 1060, 1100),
    _phase(X1, 1, "exchange", 1100, 1290, bytes=200),
    _phase(X1, 1, "wait", 1290, 2000),
    # rank 1, independent: 3000-3100, one request without a disk operation
    _call(Y1, 1, "MPI_File_write_at", 3000, 3100),
    _rpc([Y1], 1, 1, "io0", 3010, 3090, func="MPI_File_write_at"),
]
SERVER_ROWS = [
    # request (rank 0, 1) on io0: arrives 1420, two overlapping disk operations 1450-1550
    _op("io0", "req", 0, 1, 1, 1420, 1690, [X0, X1]),
    _op("io0", "trove", 0, 1, 2, 1450, 1500, [X0, X1]),
    _op("io0", "trove", 0, 1, 3, 1480, 1550, [X0]),
    # request (rank 0, 2) on io1: arrives 1520 (while io0's disk works), disk 1600-1650 and one that
    # outlives the request (1700-1800: only 1700-1750 is inside it)
    _op("io1", "req", 0, 2, 1, 1520, 1740, [X0, X1]),
    _op("io1", "trove", 0, 2, 2, 1600, 1650, [X1]),
    _op("io1", "trove", 0, 2, 3, 1700, 1800, [X1]),
    # request (rank 1, 1): server time 3020-3080, no disk operation
    _op("io0", "req", 1, 1, 4, 3020, 3080, [Y1]),
]

# By hand (ns).  Rank 0: disk = 1450-1550, 1600-1650, 1700-1750 = 200; queue = 1420-1450 (30) and
# 1520-1600 minus the disk 1520-1550 (50) = 80; I/O = the io phase and the requests (1300-1800, 500)
# minus disk and queue = 220; exchange = plan 90 + exchange 200 = 290; wait: its wait phase 150 and
# 1000-1010 before rank 1 arrived (1050) = 160; other 1950-2000 = 50 (rank 1 only waits then).
# Rank 1: its requests are none (the aggregator's carry X1 but are rank 0's): exchange 40 + 190 = 230,
# wait 710 and 1050-1060 while rank 0 plans = 720, other 2000-2010 = 10.  Y1 (no collective): queue
# 3020-3080 = 60, I/O 80 - 60 = 20, other 20.  Rank 0 waited for rank 1 (the last to arrive; no disk
# operation of its own), rank 1 for rank 0, after it arrived (the one working: its 4 disk operations).
EXPECTED = [  # callid_hex, rank, func, call, exchange, wait, io, queue, disk, other, accounted %, waited for
    ("0x00_000005", 0, WRITE_ALL, 1000, 290, 160, 220, 80, 200, 50, 95.0, 1, 0),
    ("0x01_000005", 1, WRITE_ALL, 960, 230, 720, 0, 0, 0, 10, 99.0, 0, 4),
    ("0x01_000006", 1, "MPI_File_write_at", 100, 0, 0, 20, 60, 0, 20, 80.0, None, None),
]


@pytest.fixture
def db(tmp_path):
    client = _write(tmp_path / "client.parquet", S.CLIENT_SCHEMA, CLIENT_ROWS, S.KIND_CLIENT)
    server = _write(tmp_path / "server.parquet", S.SERVER_SCHEMA, SERVER_ROWS, S.KIND_SERVER)
    out = tmp_path / "m.duckdb"
    merge(str(client), str(server), str(out), clock_sync="none")
    return out


def _tuples(rows: list[dict]) -> list[tuple]:
    return [tuple(r.values()) for r in rows]


def test_the_stats_split_each_call_as_computed_by_hand(db):
    stats = api.stats(db)
    assert _tuples(stats["slowest_calls"]) == EXPECTED
    assert list(stats["slowest_calls"][0]) == [
        "callid_hex", "rank", "func", "call_ns", "exchange_ns", "wait_ns", "io_ns", "server_queue_ns",
        "disk_ns", "other_ns", "accounted_pct", "waited_for_rank", "waited_for_disk_ops"]
    text = render_stats(stats)
    assert "exchange_ms" in text and "wait_ms" in text and "accounted_pct" in text


def test_the_example_query_gives_the_same_split(db):
    columns, rows = run_query(open_merged(db), named_query("latency_breakdown").sql)
    assert columns[:4] == ["callid_hex", "rank", "func", "call_ns"]
    assert [tuple(r) for r in rows] == EXPECTED


def test_phases_and_the_aggregators_callids_are_merged(db):
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT callid_hex, rank, phase, bytes, file_offset, size, dur_ns, t_rel_ns "
                           "FROM phases ORDER BY rank, t_start").fetchall() == [
            ("0x00_000005", 0, "plan", None, None, None, 90, 10),
            ("0x00_000005", 0, "exchange", 0, None, None, 200, 100),
            ("0x00_000005", 0, "io", 400, 0, 400, 500, 300),
            ("0x00_000005", 0, "wait", None, None, None, 150, 800),
            ("0x01_000005", 1, "plan", None, None, None, 40, 60),
            ("0x01_000005", 1, "exchange", 200, None, None, 190, 100),
            ("0x01_000005", 1, "wait", None, None, None, 710, 290)]
        rpcs = con.execute("SELECT rank, req_seq, callid_hex, callids FROM rpcs ORDER BY t_start").fetchall()
        assert rpcs == [
            (0, 1, None, [X0, X1]), (0, 2, None, [X0, X1]), (1, 1, "0x01_000006", [Y1])]
    finally:
        con.close()


def test_a_stragglers_disk_time_is_the_union_of_its_operations(tmp_path):
    """S810 on a hand-made log: five writes of 100 ns and one of 1000 ns whose four disk operations of
    400 ns run two at a time on two servers: its disk time is their union (800 ns), not their sum
    (1600 ns, more than the call)."""
    func = "MPI_File_write_at"
    ids = [0x00000001 + i for i in range(6)]
    client = [_call(i, 0, func, 10_000 * k, 10_000 * k + 100) for k, i in enumerate(ids[:5])]
    slow = ids[5]
    client += [_call(slow, 0, func, 60_000, 61_000), _rpc([slow], 0, 1, "io0", 60_050, 60_950, func=func),
               _rpc([slow], 0, 2, "io1", 60_050, 60_950, func=func)]
    client = [r._replace(size=100, bytes=100) if r.kind == "call" else r for r in client]
    server = [_op(srv, "req", 0, seq, 1, 60_060, 60_940, [slow]) for srv, seq in (("io0", 1), ("io1", 2))]
    event = 2
    for srv, seq in (("io0", 1), ("io1", 2)):
        for t in (60_100, 60_500):
            server.append(_op(srv, "trove", 0, seq, event, t, t + 400, [slow]))
            event += 1
    c = _write(tmp_path / "client.parquet", S.CLIENT_SCHEMA, client, S.KIND_CLIENT)
    s = _write(tmp_path / "server.parquet", S.SERVER_SCHEMA, server, S.KIND_SERVER)
    merge(str(c), str(s), str(tmp_path / "m.duckdb"), clock_sync="none")
    (found,) = api.insights(tmp_path / "m.duckdb", ["S810"])
    assert (found["numbers"]["disk_ops"], found["numbers"]["disk_ns"]) == (4, 800)
    assert found["numbers"]["disk_ns"] <= found["numbers"]["call_ns"] == 1000
