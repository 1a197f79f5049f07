"""The OTF2 export, read back with the OTF2 reader: every call, data call, server event, disk
operation and arrow survives, the records of every location are in time order and nest, and the
selection is honoured."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import otf2
import pytest

from callid import api
from callid_core.errors import BadValue, InputError
from callid_core.units import RankSet
from pipeline.domain import DATA_CALLS_SQL
from pipeline.export_otf2 import ANCHOR
from pipeline.merged import TABLES, VIEWS, open_merged
from pipeline.selection import IN_RANKS_SQL, Selection, select_views
from tests.conftest import EXAMPLES, cli, traced

#: the collective example with 8 ranks and 2 aggregators: arrows from every rank, through the aggregators
COLLECTIVE8 = ["-n", "8", EXAMPLES / "collective_write.py", "--cb-nodes", "2"]


@pytest.fixture(scope="module")
def collective8(tmp_path_factory):
    run = traced(tmp_path_factory.mktemp("otf2"), "out", *COLLECTIVE8)
    yield run
    run.con.close()


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    """A small synthetic trace: calls overlap on a rank, server operations overlap (lanes)."""
    out = tmp_path_factory.mktemp("otf2synth") / "synth"
    made = cli("synth", "-d", out, "--ranks", 6, "--servers", 3, "--calls", 400, "--fanout", 4,
               "--collective-share", 0.3, "--seed", 3)
    assert made.returncode == 0, made.stderr
    merged = cli("merge", out / "client.parquet", out / "server.parquet", "-o", out / "m.duckdb")
    assert merged.returncode == 0, merged.stderr
    return out / "m.duckdb"


@dataclass
class Archive:
    """What the OTF2 reader finds, by kind of record: (location group, location, event, the
    attributes of the Enter of the innermost region it is in)."""

    definitions: object
    by_kind: dict[str, list] = field(default_factory=lambda: defaultdict(list))


def read(anchor: Path) -> Archive:
    """Read an archive back and check that every location's records follow each other in time, that
    its regions nest, that every I/O operation completes once on the location and handle it began
    on, and that every arrow record lies in a server event's region."""
    with otf2.reader.open(str(anchor)) as trace:
        archive = Archive(trace.definitions)
        last: dict[str, int] = {}
        stacks: dict[str, list] = defaultdict(list)
        begun: dict[tuple, object] = {}
        for location, event in trace.events:
            kind = type(event).__name__
            where = location.name
            assert event.time >= last.get(where, 0), f"{where}: {kind} at {event.time} goes back in time"
            last[where] = event.time
            stack = stacks[where]
            enclosing = stack[-1].attributes if stack else None
            if kind == "Enter":
                stack.append(event)
            elif kind == "Leave":
                assert stack and stack.pop().region == event.region, f"{where}: Leave without its Enter"
            elif kind == "IoOperationBegin":
                key = (where, event.handle.name, event.matching_id)
                assert key not in begun
                begun[key] = event
            elif kind == "IoOperationComplete":
                # on the location and handle it began on
                begin = begun.pop((where, event.handle.name, event.matching_id))
                assert begin.time <= event.time
            elif kind == "ParameterUnsignedInt":
                assert enclosing and "event_id" in {a.name for a in enclosing}
            archive.by_kind[kind].append((location.group.name, location, event, enclosing))
        assert not begun, "I/O operations that never complete"
        assert not any(stacks.values()), "regions never left"
    return archive


def attrs(values: dict | None) -> dict:
    return {a.name: v for a, v in (values or {}).items()}


def expected(db: Path, sel: Selection) -> dict[str, Counter]:
    """What the archive must hold for ``sel``, from the merged tables (the same selection views)."""
    con = open_merged(str(db)).con
    select_views(con, sel)
    mpi = [IN_RANKS_SQL if sel.ranks is not None else "true",
           "false" if sel.files else "true"]
    if sel.window is not None:
        mpi.append(f"t_rel_ns >= {int(sel.window[0])}"
                   + ("" if sel.window[1] == float("inf") else f" AND t_rel_ns < {int(sel.window[1])}"))
    q = lambda sql: Counter(con.execute(sql).fetchall())  # noqa: E731
    data = DATA_CALLS_SQL.replace("FROM calls", "FROM sel_calls")
    out = {
        "calls": q("SELECT 'rank ' || rank, func, callid FROM sel_calls"),
        "mpi_calls": q(f"SELECT 'rank ' || rank, func, NULL FROM mpi_calls WHERE {' AND '.join(mpi)}"),
        "data": q(f"SELECT 'rank ' || rank, callid, direction, size, file FROM ({data})"),
        "ops": q("SELECT 'server ' || server, op, event_id, callid FROM sel_ops"),
        "disk": q("""SELECT 'server ' || server, event_id, CASE WHEN op LIKE '%read%' THEN 'read'
                                 WHEN op LIKE '%write%' THEN 'write' ELSE 'flush' END, size
                      FROM sel_ops WHERE layer IN ('trove', 'meta')
                        AND (op LIKE '%read%' OR op LIKE '%write%' OR op LIKE '%flush%')"""),
        "arrows": q("SELECT 'server ' || server, event_id, callid FROM sel_arrows"),
        "start": con.execute("SELECT value::BIGINT FROM run WHERE key = 'start_ns'").fetchone()[0],
    }
    con.close()
    return out


def found(archive: Archive) -> dict[str, Counter]:
    """The same, from what the archive holds."""
    enters = archive.by_kind["Enter"]
    mode = {otf2.IoOperationMode.READ: "read", otf2.IoOperationMode.WRITE: "write",
            otf2.IoOperationMode.FLUSH: "flush"}
    begins = archive.by_kind["IoOperationBegin"]
    return {
        "calls": Counter((g, e.region.name, attrs(e.attributes).get("callid")) for g, _, e, _ in enters
                         if g.startswith("rank") and e.region.name.startswith("MPI_File")),
        "mpi_calls": Counter((g, e.region.name, None) for g, _, e, _ in enters
                             if g.startswith("rank") and not e.region.name.startswith("MPI_File")),
        "data": Counter((g, attrs(e.attributes).get("callid"), mode[e.mode], e.bytes_request,
                         e.handle.file.name) for g, _, e, _ in begins
                        if g.startswith("rank") and e.mode != otf2.IoOperationMode.FLUSH),
        "ops": Counter((g, e.region.name, attrs(e.attributes)["event_id"], attrs(e.attributes).get("callid"))
                       for g, _, e, _ in enters if g.startswith("server")),
        "disk": Counter((g, attrs(enc)["event_id"], mode[e.mode], e.bytes_request)
                        for g, _, e, enc in begins if g.startswith("server")),
        "arrows": Counter((g, attrs(enc)["event_id"], e.value) for g, _, e, enc
                          in archive.by_kind["ParameterUnsignedInt"]),
        "start": archive.definitions.clock_properties.global_offset,
    }


def assert_round_trip(db: Path, sel: Selection, out: Path) -> tuple[dict, Archive, dict]:
    summary = api.export(str(db), str(out), "otf2", sel, None)
    archive = read(out / ANCHOR)
    want, got = expected(db, sel), found(archive)
    for what in want:
        assert got[what] == want[what], what
    assert summary["events"] == sum(want["calls"].values()) + sum(want["mpi_calls"].values()) \
        + sum(want["ops"].values())
    assert summary["arrows"] == sum(want["arrows"].values())
    assert summary["bytes"] == sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    # every arrow record carries the served call's CallID as its attribute too, and names a call
    for _, _, e, _ in archive.by_kind["ParameterUnsignedInt"]:
        assert e.parameter.name == "served CallID" and attrs(e.attributes)["callid"] == e.value
    return summary, archive, want


@pytest.mark.mpi
@pytest.mark.slow
def test_collective_8_ranks_round_trip(collective8, tmp_path):
    summary, archive, want = assert_round_trip(collective8.db, Selection(), tmp_path / "trace")
    n = lambda what: sum(want[what].values())  # noqa: E731
    assert n("calls") == collective8.q("SELECT count(*) FROM calls")[0][0]
    assert n("ops") == collective8.q("SELECT count(*) FROM server_ops")[0][0]
    assert n("arrows") == collective8.q("SELECT count(*) FROM arrows WHERE layer IN ('trove', 'meta')")[0][0]
    # the collective buffering run: disk operations serving several calls, calls of every rank
    assert collective8.q("SELECT max(n_callids), count(DISTINCT rank) FROM arrows")[0] >= (2, 8)
    assert n("data") and n("disk")
    groups = [g.name for g in archive.definitions.location_groups]
    assert groups[:8] == [f"rank {r}" for r in range(8)]
    assert {"server io0", "server io1"} <= set(groups)
    # the calls' I/O: the MPI-IO paradigm, collective calls flagged, handles per rank and file
    for g, _, e, _ in archive.by_kind["IoOperationBegin"]:
        paradigm = e.handle.io_paradigm.identification
        assert paradigm == ("MPI-IO" if g.startswith("rank") else "TROVE")
        if e.handle.name.endswith("collective") and g.startswith("rank"):
            assert e.handle.name.startswith(g + ":")
    coll = {cid for (cid,) in collective8.q("SELECT callid FROM calls WHERE collective")}
    flagged = {attrs(e.attributes)["callid"] for g, _, e, _ in archive.by_kind["IoOperationBegin"]
               if g.startswith("rank") and e.operation_flags & otf2.IoOperationFlag.COLLECTIVE}
    assert flagged and flagged <= coll
    # the clock: ns, from the run's start
    clock = archive.definitions.clock_properties
    assert clock.timer_resolution == 10**9 and clock.global_offset == want["start"]
    # MPI_COMM_WORLD names the ranks' locations in rank order
    world = [c for c in archive.definitions.comms if c.name == "MPI_COMM_WORLD"][0]
    assert [loc.name for loc in world.group.members] == [f"rank {r}" for r in range(8)]
    assert summary["format"] == "otf2" and summary["records"] > summary["events"]


@pytest.mark.mpi
@pytest.mark.slow
def test_collective_ranks_selection(collective8, tmp_path):
    sel = Selection(ranks=RankSet.of(range(4)))
    _, archive, want = assert_round_trip(collective8.db, sel, tmp_path / "ranks")
    assert {g.name for g in archive.definitions.location_groups if g.name.startswith("rank")} \
        == {f"rank {r}" for r in range(4)}
    assert 0 < sum(want["arrows"].values()) < collective8.q("SELECT count(*) FROM arrows")[0][0]
    # only the arrows of the selected ranks' calls, and only the server events serving them
    served = {cid for (cid,) in collective8.q("SELECT callid FROM calls WHERE rank < 4")}
    assert {cid for _, _, cid in want["arrows"]} <= served
    assert not list(archive.definitions.comms)  # not all ranks: no MPI_COMM_WORLD


@pytest.mark.mpi
@pytest.mark.slow
def test_cli_writes_the_archive(collective8, tmp_path):
    out = tmp_path / "cli"
    result = cli("export", collective8.db, "--format", "otf2", "-o", out, "--ranks", "0-1", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["format"] == "otf2" and (out / ANCHOR).is_file() and summary["arrows"] > 0


def test_synthetic_lanes_round_trip(synthetic, tmp_path):
    summary, archive, _ = assert_round_trip(synthetic, Selection(), tmp_path / "synth")
    names = {loc.name for loc in archive.definitions.locations}
    # overlapping server operations went to lanes of their server and layer
    assert {"rank 0", "io0 trove", "io0 trove #2", "io0 req #2"} <= names
    assert summary["locations"] == len(names)
    overlapping = duckdb.connect(str(synthetic), read_only=True).execute(
        "SELECT count(*) FROM (SELECT t_start, max(t_end) OVER (PARTITION BY rank ORDER BY t_start, t_end "
        "ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before FROM calls) WHERE t_start < before"
    ).fetchone()[0]
    assert bool(overlapping) == any(n.startswith("rank") and "#" in n for n in names)


def test_synthetic_window_servers_and_files(synthetic, tmp_path):
    con = duckdb.connect(str(synthetic), read_only=True)
    end = con.execute("SELECT max(t_rel_ns) FROM calls").fetchone()[0]
    file = con.execute("SELECT min(file) FROM calls").fetchone()[0]
    con.close()
    assert_round_trip(synthetic, Selection(window=(end / 4, end / 2), servers=("io1",)), tmp_path / "w")
    assert_round_trip(synthetic, Selection(files=(file,)), tmp_path / "f")


def test_output_is_replaced_only_when_it_is_an_archive(synthetic, tmp_path):
    out = tmp_path / "again"
    progress = []
    api.export(synthetic, out, "otf2", Selection(), lambda done, total: progress.append((done, total)))
    assert progress[-1][0] == progress[-1][1] and all(a[0] <= b[0] for a, b in zip(progress, progress[1:]))
    first = api.export(str(synthetic), str(out), "otf2", Selection(ranks=RankSet.of([0])), None)  # replaces
    assert read(out / ANCHOR) and first["output"] == str(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again"]  # no temporary left
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not an OTF2 archive"):
        api.export(str(synthetic), str(busy), "otf2", Selection(), None)
    assert (busy / "notes.txt").read_text() == "mine"
    with pytest.raises(BadValue, match="archive's directory"):
        api.export(str(synthetic), str(tmp_path / "trace.otf2"), "otf2", Selection(), None)
    with pytest.raises(InputError, match="does not exist"):
        api.export(str(synthetic), str(tmp_path / "no" / "such"), "otf2", Selection(), None)
    with pytest.raises(BadValue, match="nothing to export"):
        api.export(synthetic, tmp_path / "empty", "otf2", Selection(window=(1e18, float("inf"))), None)


def test_non_blocking_operations_complete_at_their_wait(synthetic, tmp_path):
    # the synthetic run as Parquet tables (a merged database 'callid merge --storage parquet' writes),
    # rank 1's writes made non-blocking, each completed by a wait 3 ms after it returns (during later
    # calls of the rank)
    db = tmp_path / "nb"
    db.mkdir()
    con = duckdb.connect(str(synthetic), read_only=True)
    writes = "FROM calls WHERE rank = 1 AND func = 'MPI_File_write_at'"
    changed = {
        "calls": """SELECT * REPLACE (CASE WHEN rank = 1 AND func = 'MPI_File_write_at'
                                         THEN 'MPI_File_iwrite_at' ELSE func END AS func,
                                    CASE WHEN rank = 1 THEN counter ELSE rid END AS rid) FROM calls""",
        "waits": f"""SELECT * FROM waits UNION ALL BY NAME
                     SELECT {', '.join(_columns(con, 'waits'))} FROM (
                         SELECT * REPLACE ('MPI_Wait' AS func, counter AS rid, t_end + 3000000 AS t_start,
                                           t_end + 3000000 AS t_end, 0 AS dur_ns,
                                           t_rel_ns + dur_ns + 3000000 AS t_rel_ns) {writes})"""}
    for table in (*TABLES, *VIEWS):
        con.execute(f"COPY ({changed.get(table, f'SELECT * FROM {table}')}) TO '{db / table}.parquet'")
    ends = dict(con.execute(f"SELECT callid, t_end {writes}").fetchall())
    con.close()
    waits = {cid: t + 3000000 for cid, t in ends.items()}
    assert waits
    _, archive, _ = assert_round_trip(db, Selection(), tmp_path / "nb_otf2")
    begins = {e.matching_id: attrs(e.attributes)["callid"]
              for _, _, e, _ in archive.by_kind["IoOperationBegin"]
              if e.operation_flags & otf2.IoOperationFlag.NON_BLOCKING}
    assert sorted(begins.values()) == sorted(waits)
    issued = {e.matching_id: e.time for _, _, e, _ in archive.by_kind["IoOperationIssued"]}
    done = {e.matching_id: e.time for _, _, e, _ in archive.by_kind["IoOperationComplete"]
            if e.matching_id in begins}
    assert issued == {m: ends[cid] for m, cid in begins.items()}
    assert done == {m: waits[cid] for m, cid in begins.items()}


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    return [name for name, *_ in con.execute(f"DESCRIBE {table}").fetchall()]
