"""``callid export`` round trips: the chrome (JSON) and perfetto (protobuf) exports of the 8-rank collective
example read back with independent readers (``json``, the Perfetto protobuf schema's own parser), replayed
by the rules Perfetto's importer follows (sorting, slice stacks, flow binding), and compared with the merged
tables: every call, server event and arrow survives, every flow starts no later than it ends, inside a
slice of the right track, and no track holds partially overlapping slices.  Also the lanes of
:mod:`pipeline.tracks` against a brute-force count.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callid import api
from callid_core.errors import BadValue, InputError
from callid_core.units import RankSet
from pipeline import export_perfetto, trace_stream
from pipeline.merged import open_merged
from pipeline.selection import IN_RANKS_SQL, Selection, select_views
from pipeline.tracks import LaneAssigner
from tests.conftest import EXAMPLES, cli, traced

COLLECTIVE8 = ["-n", "8", EXAMPLES / "collective_write.py", "--cb-nodes", "2"]


# -- lanes -------------------------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 40), st.integers(1, 15)),
                min_size=1, max_size=120),
       st.lists(st.integers(1, 120), max_size=5))
def test_lanes_never_overlap_and_are_as_few_as_the_events_at_once(rows, cuts):
    rows.sort(key=lambda r: r[1])
    track, start, dur = (np.array(c) for c in zip(*rows))
    end = start + dur
    lanes_of = LaneAssigner(4)
    bounds = sorted({0, len(rows), *(c for c in cuts if c < len(rows))})
    lanes = np.concatenate([lanes_of.assign(track[a:b], start[a:b], end[a:b])
                            for a, b in zip(bounds, bounds[1:])])
    for t in range(4):
        mine = track == t
        for lane in set(lanes[mine].tolist()):
            s, e = start[mine & (lanes == lane)], end[mine & (lanes == lane)]
            order = np.argsort(s, kind="stable")
            assert (s[order][1:] >= e[order][:-1]).all()  # one after the other (touching is fine)
        at_once = max((int(((start[mine] <= x) & (end[mine] > x)).sum()) for x in start[mine]), default=0)
        assert lanes_of.lanes[t] == at_once == (lanes[mine].max() + 1 if mine.any() else 0)


def test_lanes_come_in_order_of_start():
    lanes = LaneAssigner(1)
    lanes.assign(np.array([0]), np.array([5]), np.array([6]))
    with pytest.raises(ValueError):
        lanes.assign(np.array([0]), np.array([4]), np.array([6]))


def test_flows_are_read_in_step_with_their_slices_across_batches(monkeypatch):
    """Slices starting at the same time as a batch's last one may fall in the next batch: their flows wait."""
    monkeypatch.setattr(trace_stream, "BATCH", 2)
    con = duckdb.connect()
    con.execute("CREATE TABLE r AS SELECT i AS callid, i // 3 AS t_start FROM range(10) t(i)")  # ties of 3
    con.execute("CREATE TABLE f AS SELECT j AS id, j % 10 AS src_callid, (j % 10) // 3 AS k "
                "FROM range(40) t(j)")
    src = trace_stream.Source.__new__(trace_stream.Source)
    src.con = con
    batches = list(src._with_flows("SELECT * FROM r ORDER BY t_start, callid",
                                   "SELECT * FROM f ORDER BY k, id", "r.callid = f.src_callid", "src_callid",
                                   "list(id ORDER BY id) AS ids"))
    assert max(b.num_rows for b in batches) == 2
    got = {c: ids for b in batches
           for c, ids in zip(b.column("callid").to_pylist(), b.column("ids").to_pylist())}
    assert got == {c: [c, c + 10, c + 20, c + 30] for c in range(10)}


# -- independent readers -------------------------------------------------------------------------------

@dataclass
class Slice:
    track: tuple[str, str]  # (process name, thread name)
    ts: int  # ns
    end: int
    name: str
    cat: str
    args: dict


@dataclass
class Replay:
    """What a viewer would load: slices, and flows bound to slices (``None``: not bound)."""

    slices: list[Slice] = field(default_factory=list)
    flows: dict[int, list] = field(default_factory=dict)  # id -> [source slice, dest slice, start ts, end ts]
    overlaps: int = 0  # slices partially overlapping one open on their track
    nested: int = 0  # slices begun inside another of their track
    flow_problems: list[str] = field(default_factory=list)
    ids: set = field(default_factory=set)  # (pid, tid) of the JSON's events


def read_chrome(path) -> Replay:
    """Replay a trace-event JSON file as Perfetto imports it: events sorted by time, at equal times
    complete events first (longer first), then the rest in file order; a complete event closes the slices
    of its thread that ended by its start; a flow event binds to the slice open on its thread."""
    with open(path) as fh:
        events = json.load(fh)["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e["ph"] == "M" and e["name"] == "thread_name"}
    r = Replay(ids={(e["pid"], e["tid"]) for e in events})

    def key(i_e):
        i, e = i_e
        ts = round(e["ts"] * 1000)
        return (ts, 0, -round(e["dur"] * 1000), i) if e["ph"] == "X" else (ts, 1, 0, i)

    stacks: dict[tuple, list[Slice]] = defaultdict(list)
    for _, e in sorted(((i, e) for i, e in enumerate(events) if e["ph"] != "M"), key=key):
        track = (procs[e["pid"]], threads[(e["pid"], e["tid"])])
        ts, stack = round(e["ts"] * 1000), stacks[track]
        if e["ph"] == "X":
            s = Slice(track, ts, ts + round(e["dur"] * 1000), e["name"], e["cat"], e["args"])
            while stack and stack[-1].end <= ts:
                stack.pop()
            if stack and s.end > stack[-1].end:
                r.overlaps += 1  # (Perfetto drops it)
                continue
            r.nested += bool(stack)
            stack.append(s)
            r.slices.append(s)
        elif e["ph"] == "s":
            top = stack[-1] if stack and stack[-1].ts <= ts < stack[-1].end else None
            if e["id"] in r.flows:
                r.flow_problems.append(f"flow {e['id']} starts twice")
            r.flows[e["id"]] = [top, None, ts, None]
        elif e["ph"] == "f":
            assert e.get("bp") == "e"
            top = stack[-1] if stack and stack[-1].ts <= ts < stack[-1].end else None
            if e["id"] not in r.flows:
                r.flow_problems.append(f"flow {e['id']} ends before it starts")  # (Perfetto drops it)
                continue
            r.flows[e["id"]][1:4:2] = [top, ts]
    return r


def read_perfetto(path) -> Replay:
    """Replay a protobuf trace as Perfetto imports it: packets sorted by time, at equal times in file
    order; a begin opens a slice on its track, an end closes the top one; the flow ids of an event begin a
    flow (or step it), its terminating flow ids end an active flow, binding to the event's slice."""
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    with open(path, "rb") as fh:
        trace = pb.Trace.FromString(fh.read())
    names, cats, anames, tracks, events = {}, {}, {}, {}, []
    for i, p in enumerate(trace.packet):
        if p.HasField("interned_data"):
            if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
                names, cats, anames = {}, {}, {}
            names.update({n.iid: n.name for n in p.interned_data.event_names})
            cats.update({n.iid: n.name for n in p.interned_data.event_categories})
            anames.update({n.iid: n.name for n in p.interned_data.debug_annotation_names})
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            tracks[d.uuid] = (d.name, d.parent_uuid if d.HasField("parent_uuid") else None)
        if p.HasField("track_event"):
            e = p.track_event
            args = {anames[a.name_iid]: a.string_value if a.HasField("string_value") else a.int_value
                    for a in e.debug_annotations}
            cat = cats.get(e.category_iids[0]) if e.category_iids else None
            events.append((p.timestamp, i, e.type, e.track_uuid, names.get(e.name_iid), cat, args,
                           list(e.flow_ids), list(e.terminating_flow_ids)))
    r = Replay()
    stacks: dict[int, list[Slice]] = defaultdict(list)
    active: dict[int, tuple[Slice, int]] = {}
    for ts, _, kind, uuid, name, cat, args, out_ids, in_ids in sorted(events, key=lambda e: e[:2]):
        name_t, parent = tracks[uuid]
        stack = stacks[uuid]
        if kind == pb.TrackEvent.TYPE_SLICE_BEGIN:
            r.nested += bool(stack)
            s = Slice((tracks[parent][0], name_t), ts, -1, name, cat, args)
            stack.append(s)
            r.slices.append(s)
        else:
            assert kind == pb.TrackEvent.TYPE_SLICE_END
            s = stack.pop()
            s.end = ts
        for f in out_ids:
            if f in active:
                r.flow_problems.append(f"flow {f} starts twice")
            active[f] = (s, ts)
            r.flows[f] = [s, None, ts, None]
        for f in in_ids:
            if f not in active:
                r.flow_problems.append(f"flow {f} ends before it starts")  # (Perfetto ignores it)
                continue
            del active[f]
            r.flows[f][1:4:2] = [s, ts]
    r.flow_problems += [f"flow {f} never ends" for f in active]
    return r


# -- the truth: the merged tables --------------------------------------------------------------------

@dataclass
class Truth:
    calls: Counter  # function -> calls (and MPI calls without I/O)
    ops: Counter  # (server, layer) -> server events
    callids: Counter  # CallIDs of the calls
    arrows: Counter  # (source CallID, server, event_id, from_rank) -> arrows


def truth(db, sel: Selection) -> Truth:
    """Counts from the merged tables for a selection.  Where each arrow must start: on rank ``from_rank``,
    the selected call started last by ``from_t`` if it is still running then (the aggregator's call
    during which it sent the request), else the arrow's own call."""
    con = open_merged(str(db)).con
    try:
        select_views(con, sel)
        mpi = "false" if sel.files else "true"
        if sel.ranks is not None:
            mpi += " AND " + IN_RANKS_SQL
        calls = Counter(dict(con.execute(f"""
            SELECT func, count(*) FROM (SELECT func FROM sel_calls UNION ALL
                                        SELECT func FROM mpi_calls WHERE {mpi}) GROUP BY 1""").fetchall()))
        ops = Counter({(s, la): n for s, la, n in con.execute(
            "SELECT server, layer, count(*) FROM sel_ops GROUP BY ALL").fetchall()})
        callids = Counter(h for (h,) in con.execute(
            "SELECT callid_hex FROM sel_calls WHERE callid IS NOT NULL").fetchall())
        arrows = Counter(tuple(r) for r in con.execute("""
            WITH a AS (
                SELECT a.*, (SELECT arg_max({'h': c.callid_hex, 'e': greatest(c.t_end, c.t_start + 1)},
                                            c.t_start)
                             FROM sel_calls c WHERE c.rank = a.from_rank AND c.callid IS NOT NULL
                               AND c.t_start <= a.from_t) AS last
                FROM sel_arrows a),
            b AS (SELECT *, from_rank <> rank AND last.e > from_t AS agg FROM a)
            SELECT CASE WHEN agg THEN last.h ELSE callid_hex END, server, event_id,
                   CASE WHEN agg THEN from_rank ELSE rank END
            FROM b""").fetchall())
    finally:
        con.close()
    return Truth(calls, ops, callids, arrows)


def check(r: Replay, t: Truth) -> None:
    """The replayed trace holds exactly the selection, with every arrow a flow between the right slices."""
    assert r.overlaps == 0 and r.nested == 0  # one slice at a time per track
    assert r.flow_problems == []
    assert all(pid >= 1 and tid >= 1 for pid, tid in r.ids)
    calls = [s for s in r.slices if s.track[0] == "MPI ranks"]
    ops = [s for s in r.slices if s.track[0].startswith("server ")]
    assert len(calls) + len(ops) == len(r.slices)
    assert Counter(s.name for s in calls) == t.calls
    assert Counter((s.track[0].removeprefix("server "), s.cat) for s in ops) == t.ops
    assert all(s.track[1].split(" #")[0] == s.cat for s in ops)  # a layer's thread
    assert Counter(s.args["callid"] for s in calls if s.args.get("callid")) == t.callids
    assert all(s.end > s.ts for s in r.slices)
    got = Counter()
    for fid, (src, dst, ts_s, ts_f) in r.flows.items():
        assert src is not None and dst is not None, f"flow {fid} is bound to no slice"
        assert src.ts <= ts_s < src.end and dst.ts <= ts_f <= dst.end  # inside their slices
        assert ts_s <= ts_f  # starts no later than it ends
        assert src.track[0] == "MPI ranks" and dst.track[0].startswith("server ")
        rank = int(src.track[1].split()[1])
        assert src.track[1].split(" #")[0] == f"rank {rank}"
        got[(src.args["callid"], dst.track[0].removeprefix("server "), dst.args["event_id"], rank)] += 1
    assert got == t.arrows


# -- the exports of the 8-rank collective -------------------------------------------------------------

@pytest.fixture(scope="module")
def collective8(tmp_path_factory):
    """8 ranks writing and reading collectively through 2 aggregators, traced and merged."""
    return traced(tmp_path_factory.mktemp("collective8"), "out", *COLLECTIVE8)


READERS = {"chrome": read_chrome, "perfetto": read_perfetto}


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["chrome", "perfetto"])
def test_every_call_server_event_and_arrow_survives_the_round_trip(collective8, tmp_path, fmt):
    out = tmp_path / f"trace.{fmt}"
    result = cli("export", collective8.db, "--format", fmt, "-o", out, "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    t = truth(collective8.db, Selection())
    assert summary["events"] == sum(t.calls.values()) + sum(t.ops.values())
    assert summary["arrows"] == sum(t.arrows.values()) > 1000 and summary["arrows_backwards"] == 0
    assert summary["bytes"] == out.stat().st_size
    con = open_merged(str(collective8.db)).con
    select_views(con, Selection())
    aggregated = con.execute("SELECT count(*) FROM sel_arrows WHERE from_rank <> rank").fetchall()[0][0]
    con.close()
    assert aggregated > 0  # arrows leaving the aggregators' calls (collective buffering)
    check(READERS[fmt](out), t)


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["chrome", "perfetto"])
def test_a_selection_exports_what_the_view_selects(collective8, tmp_path, fmt):
    sel = Selection(ranks=RankSet.of({1, 5}))  # not the aggregators: their arrows start on the calls
    out = tmp_path / f"part.{fmt}"
    summary = api.export(str(collective8.db), str(out), fmt, sel, None)
    t = truth(collective8.db, sel)
    assert sum(t.calls.values()) and summary["arrows"] == sum(t.arrows.values()) > 0
    check(READERS[fmt](out), t)


@pytest.mark.mpi
@pytest.mark.slow
def test_progress_and_one_line_errors(collective8, tmp_path):
    seen = []
    api.export(str(collective8.db), str(tmp_path / "t.json"), "chrome", Selection(),
                lambda done, total: seen.append((done, total)))
    assert seen[0][0] == 0 and seen[-1][0] == seen[-1][1] > 0
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    with pytest.raises(BadValue, match="nothing to export.*widen --window"):
        api.export(str(collective8.db), str(tmp_path / "e.json"), "chrome",
                    Selection(window=(1e15, float("inf"))), None)
    with pytest.raises(InputError, match="does not exist"):
        api.export(str(collective8.db), str(tmp_path / "no" / "t.json"), "perfetto", Selection(), None)
    with pytest.raises(BadValue, match="unknown trace format"):
        api.export(str(collective8.db), str(tmp_path / "t.x"), "xml", Selection(), None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]  # nothing half-written left behind
    result = cli("export", collective8.db, "--format", "chrome", "-o", tmp_path / "no" / "t.json")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """A small synthetic run whose calls and server events overlap in time (lanes), merged; of two disk
    operations serving one call each, the first moved (in the server log) to start before its call
    (clocks off), the second to end before it: returns the database and their event ids (server io0)."""
    out = tmp_path_factory.mktemp("synthetic")
    run = cli("synth", "--ranks", "8", "--servers", "2", "--calls", "300", "--fanout", "4",
              "--seed", "3", "-d", out)
    assert run.returncode == 0, run.stderr
    first = out / "first.duckdb"
    assert cli("merge", out / "client.parquet", out / "server.parquet", "-o", first).returncode == 0
    con = open_merged(str(first)).con
    try:
        moved = con.execute("""
            SELECT a.event_id, a.call_t_start FROM arrows a JOIN server_ops o USING (server, event_id)
            WHERE a.server = 'io0' AND a.n_callids = 1 AND o.rank = a.rank
            ORDER BY a.event_id LIMIT 2""").fetchall()
    finally:
        con.close()
    log = pq.read_table(out / "server.parquet")
    t_start, t_end = log["t_start"].to_numpy().copy(), log["t_end"].to_numpy().copy()
    io0 = np.asarray(log["server"]) == "io0"
    for (eid, c), (lo, hi) in zip(moved, ((-1000, None), (-3000, -2000))):
        row = np.flatnonzero(io0 & (log["event_id"].to_numpy() == eid))[0]
        t_start[row], t_end[row] = c + lo, t_end[row] if hi is None else c + hi
    log = log.set_column(log.schema.get_field_index("t_start"), "t_start", pa.array(t_start))
    log = log.set_column(log.schema.get_field_index("t_end"), "t_end", pa.array(t_end))
    pq.write_table(log, out / "server.parquet")
    db = out / "m.duckdb"
    merge = cli("merge", out / "client.parquet", out / "server.parquet", "-o", db)
    assert merge.returncode == 0, merge.stderr
    return db, [eid for eid, _ in moved]


SELECTIONS = [Selection(), Selection(ranks=RankSet.of({1, 2})), Selection(window=(2e6, 6e6)),
              Selection(servers=("io1",))]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["chrome", "perfetto"])
@pytest.mark.parametrize("sel", SELECTIONS, ids=lambda sel: sel.describe())
def test_overlapping_events_take_lanes_and_keep_their_arrows(synthetic, tmp_path, monkeypatch, fmt, sel):
    monkeypatch.setattr(trace_stream, "BATCH", 64)  # many batches: flows read in step, lanes carried over
    monkeypatch.setattr(export_perfetto, "CHUNK", 7)
    db, (_, late) = synthetic
    out = tmp_path / f"trace.{fmt}"
    summary = api.export(str(db), str(out), fmt, sel, None)
    r, t = READERS[fmt](out), truth(db, sel)
    if sel.everything:
        assert {s.track[1] for s in r.slices} >= {"rank 3 #2", "trove #2", "req #2"}
        assert summary["arrows_backwards"] == 1
    if summary["arrows_backwards"]:
        # the arrow of the operation that ends before its call starts cannot go forwards: viewers drop it
        (fid,) = [f for f, (_, dst, _, _) in r.flows.items() if dst is None]
        del r.flows[fid]
        r.flow_problems = [p for p in r.flow_problems if not p.startswith(f"flow {fid} ")]
        t.arrows -= Counter({k: 1 for k in t.arrows if k[1:3] == ("io0", late)})
    check(r, t)


def _trace_processor() -> str | None:
    """A trace_processor_shell binary to load traces with: $TRACE_PROCESSOR_SHELL, one on PATH, or the one
    the perfetto package keeps once it has downloaded it (it cannot download here: no network)."""
    found = os.environ.get("TRACE_PROCESSOR_SHELL") or shutil.which("trace_processor_shell")
    if found:
        return found
    cache = os.path.expanduser("~/.local/share/perfetto/prebuilts")
    names = sorted(os.listdir(cache)) if os.path.isdir(cache) else []
    shells = [n for n in names if n.startswith("trace_processor_shell") and not n.endswith(".tmp")]
    return os.path.join(cache, shells[-1]) if shells else None


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["chrome", "perfetto"])
def test_perfetto_itself_loads_every_slice_and_flow(collective8, tmp_path, fmt):
    shell = _trace_processor()
    if shell is None:
        pytest.skip("no trace_processor_shell here (the perfetto package downloads it on first use)")
    from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig

    out = tmp_path / f"trace.{fmt}"
    summary = api.export(str(collective8.db), str(out), fmt, Selection(), None)
    tp = TraceProcessor(trace=str(out), config=TraceProcessorConfig(bin_path=shell))
    try:
        slices = tp.query("SELECT count(*) AS n FROM slice").as_pandas_dataframe()["n"][0]
        flows = tp.query("SELECT count(*) AS n FROM flow f JOIN slice a ON a.id = f.slice_out "
                         "JOIN slice b ON b.id = f.slice_in WHERE a.ts <= b.ts + b.dur"
                         ).as_pandas_dataframe()["n"][0]
        dropped = tp.query("SELECT coalesce(sum(value), 0) AS n FROM stats WHERE name IN "
                           "('flow_end_without_start', 'flow_no_enclosing_slice', "
                           "'slice_drop_overlapping_complete_event', 'misplaced_end_event')"
                           ).as_pandas_dataframe()["n"][0]
    finally:
        tp.close()
    assert (slices, flows, dropped) == (summary["events"], summary["arrows"], 0)
