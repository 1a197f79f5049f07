"""The tracers' switches (HDTrace's wrapper has them): every row written at once, hints and the
collectives without I/O not logged, and the checks that then cannot decide say so."""

from __future__ import annotations

import collections
import json
import textwrap

import duckdb
import pyarrow.parquet as pq
import pytest

from tests.conftest import callid_cmd, cli

pytestmark = pytest.mark.mpi

CRASHING = textwrap.dedent("""
    import os, signal
    from mpi4py import MPI
    fh = MPI.File.Open(MPI.COMM_WORLD, "/pvfs2/crash", MPI.MODE_CREATE | MPI.MODE_WRONLY)
    for i in range(3):
        fh.Write_at(i * 10, b"z" * 10)
    os.kill(os.getpid(), signal.SIGKILL)  # (before the log's timer writes anything)
""")

HINTED = textwrap.dedent("""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    fh = MPI.File.Open(comm, "/pvfs2/hinted", MPI.MODE_CREATE | MPI.MODE_RDWR,
                       MPI.Info.Create(items={"my_own_hint": "1"}))
    fh.Write_at(comm.rank * 10, b"h" * 10)
    comm.Barrier()
    fh.Close()
""")


def test_every_row_written_at_once_survives_a_crash(tmp_path):
    (tmp_path / "crash.py").write_text(CRASHING)
    run = callid_cmd("run", "-n", 1, "-d", tmp_path / "out", "--flush-rows", 1, tmp_path / "crash.py")
    assert run.returncode != 0
    rows = pq.read_table(tmp_path / "out" / "client.parquet").to_pylist()
    calls = [r["func"] for r in rows if r["kind"] == "call"]
    assert calls == ["MPI_File_open"] + ["MPI_File_write_at"] * 3


@pytest.mark.slow
def test_hints_and_collectives_switched_off_are_not_logged_and_their_checks_say_so(tmp_path):
    (tmp_path / "hinted.py").write_text(HINTED)
    out = tmp_path / "out"
    run = callid_cmd("run", "-n", 2, "-d", out, "--no-trace-hints", "--no-trace-mpi", tmp_path / "hinted.py")
    assert run.returncode == 0, run.stderr
    merged = cli("merge", out / "client.parquet", out / "server.parquet", "-o", out / "m.duckdb")
    assert merged.returncode == 0, merged.stderr
    result = json.loads(cli("check", out / "m.duckdb", "--json").stdout)
    assert result["findings"] == []  # (on: H301 for my_own_hint)
    assert result["source"]["label"] == "a traced run (--no-trace-hints, --no-trace-mpi)"
    undecidable = {u["code"]: u["missing"] for u in result["undecidable"]}
    assert undecidable["H301"] == ["hints"] and "barriers" in undecidable["D502"]
    rows = pq.read_table(out / "client.parquet").to_pylist()
    assert not [r for r in rows if r["kind"] == "mpi"] and not [r for r in rows if r["hints"]]
    on = callid_cmd("run", "-n", 2, "-d", tmp_path / "on", tmp_path / "hinted.py")
    assert on.returncode == 0, on.stderr
    rows = pq.read_table(tmp_path / "on" / "client.parquet").to_pylist()
    assert [r["func"] for r in rows if r["kind"] == "mpi"] == ["MPI_Barrier"] * 2
    assert not [r for r in rows if r["kind"] == "nested"]  # (off by default)
    opens = [r for r in rows if r["kind"] == "call" and r["func"] == "MPI_File_open"]
    assert {r["hints"] for r in opens} == {"my_own_hint=1"}


COLLECTIVE = textwrap.dedent("""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    fh = MPI.File.Open(comm, "/pvfs2/nested", MPI.MODE_CREATE | MPI.MODE_RDWR)
    fh.Write_at_all(comm.rank * 4096, bytes([65 + comm.rank]) * 4096)
    comm.Barrier()
    fh.Close()
""")


def test_nested_calls_switched_on_are_the_mpi_ios_own_inside_each_call(tmp_path):
    """--trace-nested: the collectives callid's MPI-IO makes inside a traced call are nested_calls rows
    with the call's CallID, inside its time, on the file's communicator; the program's own calls are
    the same rows as without it."""
    (tmp_path / "coll.py").write_text(COLLECTIVE)
    out = tmp_path / "out"
    run = callid_cmd("run", "-n", 2, "--servers", 2, "-d", out, "--trace-nested", tmp_path / "coll.py")
    assert run.returncode == 0, run.stderr[-2000:]
    merged = cli("merge", out / "client.parquet", out / "server.parquet", "-o", out / "m.duckdb")
    assert merged.returncode == 0 and "nested_calls" in merged.stdout, merged.stderr
    db = duckdb.connect(str(out / "m.duckdb"), read_only=True)
    outside = db.execute("SELECT count(*) FROM nested_calls n LEFT JOIN calls c ON c.callid = n.callid AND "
                         "c.rank = n.rank WHERE c.callid IS NULL OR n.t_start < c.t_start OR "
                         "n.t_end > c.t_end OR n.depth <> 1 OR n.comm_id <> c.comm_id").fetchone()[0]
    assert outside == 0
    made = db.execute("SELECT DISTINCT c.func, n.func, n.comm_size FROM nested_calls n JOIN calls c "
                      "USING (callid)").fetchall()
    assert {("MPI_File_open", "MPI_Allgather", 2), ("MPI_File_write_at_all", "MPI_Allgather", 2),
            ("MPI_File_close", "MPI_Barrier", 2)} <= set(made), made
    assert db.execute("SELECT func, count(*) FROM mpi_calls GROUP BY func").fetchall() == [("MPI_Barrier", 2)]
    assert db.execute("SELECT count(*) FROM nested_calls WHERE callid_hex IS NULL").fetchone()[0] == 0
    # the exports show them (on the rank's second row, under the calls they were made in)
    export = cli("export", out / "m.duckdb", "--format", "chrome", "-o", out / "t.json")
    assert export.returncode == 0, export.stderr
    events = json.loads((out / "t.json").read_text())["traceEvents"]
    shown = collections.Counter(e["name"] for e in events if e.get("ph") == "X" and e["pid"] == 1)
    assert shown == collections.Counter(f for (f,) in db.execute(
        "SELECT func FROM calls UNION ALL SELECT func FROM mpi_calls UNION ALL SELECT func FROM nested_calls"
    ).fetchall())


def test_romio_hints_file_gives_every_open_its_hints_under_the_programs_own(tmp_path):
    """ROMIO_HINTS names a file of "key value" lines (as ROMIO reads it): every open of the simulated file
    system gets them, the program's own hints over them; the open logs what it got; striping_factor 1 puts
    the file on one I/O server."""
    (tmp_path / "hinted.py").write_text(HINTED)
    (tmp_path / "hints").write_text("# hints\nstriping_factor 1\nmy_own_hint 0\nnot-a-pair\n")
    run = callid_cmd("run", "-n", 2, "--servers", 2, "-d", tmp_path / "out", tmp_path / "hinted.py",
                     env={"ROMIO_HINTS": str(tmp_path / "hints")})
    assert run.returncode == 0, run.stderr[-2000:]
    rows = pq.read_table(tmp_path / "out" / "server.parquet").to_pylist()
    written = {r["server"] for r in rows if r["layer"] == "trove" and r["op"] == "trove_write"}
    assert written in ({"io0"}, {"io1"})
    opens = [r for r in pq.read_table(tmp_path / "out" / "client.parquet").to_pylist()
             if r["kind"] == "call" and r["func"] == "MPI_File_open"]
    assert [dict(kv.split("=") for kv in r["hints"].split(";")) for r in opens] == \
        [{"striping_factor": "1", "my_own_hint": "1"}] * 2
