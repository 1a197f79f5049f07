"""End to end through the ``callid`` command: real ranks under mpiexec, real servers, merge, stats."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import duckdb
import pyarrow.parquet as pq
import pytest

from tests.conftest import CALLID, DEMO, ROOT, callid_cmd, cli, traced

pytestmark = pytest.mark.mpi


def test_demo_read_back_check_passes(demo):
    assert "rank 0: read-back of rank 1's segment OK" in demo.stdout
    assert "rank 1: read-back of rank 0's segment OK" in demo.stdout


def test_demo_each_rank_has_eight_calls_with_distinct_callids(demo):
    rows = demo.con.sql("SELECT rank, count(*), count(DISTINCT callid) FROM calls GROUP BY rank "
                          "ORDER BY rank").fetchall()
    assert rows == [(0, 8, 8), (1, 8, 8)]
    assert demo.con.execute("SELECT count(DISTINCT callid) FROM calls").fetchall()[0][0] == 16


def test_demo_every_1mib_read_and_write_has_16_arrows_8_per_server(demo):
    rows = demo.con.sql("""
        SELECT c.callid, c.func, a.server, count(*) AS n, sum(a.size) AS bytes
        FROM calls c JOIN arrows a USING (callid)
        WHERE c.func IN ('MPI_File_write', 'MPI_File_read') AND a.layer = 'trove'
        GROUP BY ALL ORDER BY ALL""").fetchall()
    assert len(rows) == 8  # 4 calls x 2 servers
    assert {(func, server, n, b) for _, func, server, n, b in rows} == {
        (f, s, 8, 512 * 1024) for f in ("MPI_File_write", "MPI_File_read") for s in ("io0", "io1")}
    total = demo.con.sql("SELECT func, count(*) FROM arrows WHERE func IN "
                           "('MPI_File_write', 'MPI_File_read') GROUP BY func ORDER BY func").fetchall()
    assert total == [("MPI_File_read", 32), ("MPI_File_write", 32)]


def test_demo_every_trove_read_and_write_carries_a_callid(demo):
    server = pq.read_table(demo.out / "server.parquet").to_pylist()
    trove = [r for r in server if r["op"] in ("trove_read", "trove_write")]
    assert len(trove) == 64
    calls = {r["callid"] for r in pq.read_table(demo.out / "client.parquet").to_pylist()}
    assert all(r["callid"] in calls and r["callids"] == [r["callid"]] for r in trove)


def test_demo_statistics(demo):
    stats = demo.stats
    assert stats["distinct_callids"] == 16
    # 64 Trove data operations + the metadata store operations of the two opens of rank 0, the
    # creation of the file's two datafiles by the first and the datafiles' sizes asked by the second
    assert stats["arrows"] == 70
    assert stats["avg_arrows_per_callid"] == round(70 / 6, 3)
    assert stats["unattributed_server_ops"] == 0


@pytest.mark.slow
def test_no_callid_logs_the_same_events_without_callids(demo, tmp_path):
    run = traced(tmp_path, "out", "--no-callid", *DEMO)
    out, stats = run.out, run.stats
    query = ("SELECT server, layer, op, count(*) FROM read_parquet('{}') GROUP BY ALL ORDER BY ALL")
    with_ids = duckdb.sql(query.format(demo.out / "server.parquet")).fetchall()
    without = duckdb.sql(query.format(out / "server.parquet")).fetchall()
    assert without == with_ids
    sentinel = 2**64 - 1
    server = pq.read_table(out / "server.parquet")
    assert set(server.column("callid").to_pylist()) == {sentinel}
    assert all(ids == [] for ids in server.column("callids").to_pylist())
    client = pq.read_table(out / "client.parquet")
    assert set(client.column("callid").to_pylist()) == {sentinel}
    assert client.num_rows == pq.read_table(demo.out / "client.parquet").num_rows
    assert stats["arrows"] == 0 and stats["distinct_callids"] == 0
    assert stats["unattributed_server_ops"] == 70


@pytest.mark.slow
def test_thesis_layout_32_8(tmp_path):
    run = traced(tmp_path, "out", "--callid-layout", "32/8", *DEMO)
    out, stats = run.out, run.stats
    assert stats["distinct_callids"] == 16 and stats["arrows"] == 70
    rows = pq.read_table(out / "client.parquet", columns=["kind", "callid"]).to_pylist()
    stamped = {r["callid"] for r in rows if r["kind"] not in ("mpi", "type")}
    assert stamped == {r << 24 | c for r in (0, 1) for c in range(1, 9)}
    # (MPI_Barrier and the datatypes' rows: not stamped)
    assert {r["callid"] for r in rows if r["kind"] in ("mpi", "type")} == {2**32 - 1}


REAL_FILE_APP = textwrap.dedent("""
    import os, sys
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    path = sys.argv[1]
    fh = MPI.File.Open(comm, path, MPI.MODE_RDWR | MPI.MODE_CREATE)
    fh.Write_at(comm.rank * 100, bytes([65 + comm.rank]) * 100)
    fh.Sync()
    buf = bytearray(100)
    fh.Read_at(comm.rank * 100, buf)
    assert buf == bytes([65 + comm.rank]) * 100
    size = fh.Get_size()
    fh.Close()
    assert size >= 100 * (comm.rank + 1), size  # its own write, synced; the others' need not be yet
""")


@pytest.mark.parametrize("ranks", [1, pytest.param(3, marks=pytest.mark.slow)])
def test_files_outside_the_mount_use_real_mpiio_and_are_still_stamped(tmp_path, ranks):
    (tmp_path / "realapp.py").write_text(REAL_FILE_APP)
    target = tmp_path / "real.dat"
    run = callid_cmd("run", "-n", ranks, "-d", tmp_path / "out", "-m", "realapp", target, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert target.stat().st_size == 100 * ranks
    client = pq.read_table(tmp_path / "out" / "client.parquet").to_pylist()
    calls = [r for r in client if r["kind"] == "call"]
    funcs = sorted(r["func"] for r in calls if r["rank"] == 0)
    assert funcs == sorted(["MPI_File_open", "MPI_File_write_at", "MPI_File_sync", "MPI_File_read_at",
                            "MPI_File_get_size", "MPI_File_close"])
    assert len({r["callid"] for r in calls}) == 6 * ranks
    writes = [r for r in client if r["func"] == "MPI_File_write_at"]
    assert sorted((r["offset"], r["size"], r["bytes"]) for r in writes) == [
        (100 * r, 100, 100) for r in range(ranks)]
    assert {r["kind"] for r in client} == {"call", "type"}  # no server was involved (no rpc rows)
    assert pq.read_table(tmp_path / "out" / "server.parquet").num_rows == 0


@pytest.mark.parametrize("args, message", [
    (["--flow-buffers", "4", "app.py"],
     "callid: error: no such option: --flow-buffers (see 'callid run --help')"),
    (["missing.py"], "callid: error: missing.py: no such script"),
])
def test_run_usage_errors_name_what_is_wrong(tmp_path, args, message):
    run = cli("run", "-d", tmp_path / "out", *args, cwd=tmp_path)  # (refused: nothing starts)
    assert (run.returncode, run.stderr.strip()) == (2, message)
    assert not (tmp_path / "out").exists()


def test_a_failing_rank_is_named_and_no_server_is_left_behind(tmp_path):
    app = tmp_path / "fail.py"
    app.write_text("from mpi4py import MPI\n"
                   "fh = MPI.File.Open(MPI.COMM_WORLD, '/pvfs2/f', MPI.MODE_RDWR | MPI.MODE_CREATE)\n"
                   "if MPI.COMM_WORLD.rank == 1:\n    raise ValueError('deliberate')\n"
                   "MPI.COMM_WORLD.Barrier()\n")
    run = callid_cmd("run", "-n", 2, "-d", tmp_path / "out", app)
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("callid: error: rank 1 failed: ValueError: deliberate")
    for addr in (tmp_path / "out" / "servers").glob("*.addr"):
        pid = json.loads(addr.read_text())["pid"]
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


SIM_FS_APP = textwrap.dedent("""
    import sys
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    path = "/pvfs2/calls"

    def error_class(fn):
        try:
            fn()
        except MPI.Exception as exc:
            return exc.Get_error_class()
        return None

    info = MPI.Info.Create()
    info.Set("striping_factor", "2")
    info.Set("striping_unit", "4096")
    fh = MPI.File.Open(comm, path, MPI.MODE_RDWR | MPI.MODE_CREATE, info)
    block = bytes([rank + 1]) * 10000
    fh.Seek(rank * 10000)
    assert fh.Get_position() == rank * 10000
    fh.Write(block)
    assert fh.Get_position() == (rank + 1) * 10000
    fh.Write_at(size * 10000 + rank * 100, bytes([200 + rank]) * 100)
    fh.Sync()
    assert fh.Get_size() == size * 10100, fh.Get_size()
    nxt = (rank + 1) % size
    buf = bytearray(10000)
    status = MPI.Status()
    fh.Read_at(nxt * 10000, buf, status)
    assert buf == bytes([nxt + 1]) * 10000 and status.Get_count(MPI.BYTE) == 10000
    fh.Seek(0, MPI.SEEK_END)
    assert fh.Get_position() == size * 10100
    comm.Barrier()
    fh.Set_size(5000)
    assert fh.Get_size() == 5000
    short = bytearray(8000)
    fh.Read_at(0, short, status)
    assert status.Get_count(MPI.BYTE) == 5000 and short[:5000] == bytes([1]) * 5000
    fh.Close()
    ro = MPI.File.Open(comm, path, MPI.MODE_RDONLY)
    assert error_class(lambda: ro.Write_at(0, b"x")) == MPI.ERR_READ_ONLY
    ro.Close()
    assert error_class(lambda: MPI.File.Open(comm, path, MPI.MODE_RDWR | MPI.MODE_CREATE | MPI.MODE_EXCL)) \\
        == MPI.ERR_FILE_EXISTS
    assert error_class(lambda: MPI.File.Open(comm, path, MPI.MODE_RDONLY | MPI.MODE_CREATE)) == MPI.ERR_AMODE
    comm.Barrier()
    if rank == 0:
        MPI.File.Delete(path)
    comm.Barrier()
    assert error_class(lambda: MPI.File.Open(comm, path, MPI.MODE_RDONLY)) == MPI.ERR_NO_SUCH_FILE
    print(f"rank {rank}: all checks passed", flush=True)
""")


@pytest.mark.parametrize("ranks", [1, pytest.param(3, marks=pytest.mark.slow)])
def test_file_calls_on_the_simulated_file_system(tmp_path, ranks):
    (tmp_path / "simapp.py").write_text(SIM_FS_APP)
    run = callid_cmd("run", "-n", ranks, "--servers", 3, "-d", tmp_path / "out", tmp_path / "simapp.py")
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("all checks passed") == ranks
    db = tmp_path / "out" / "m.duckdb"
    assert cli("merge", tmp_path / "out" / "client.parquet", tmp_path / "out" / "server.parquet",
               "-o", db).returncode == 0
    con = duckdb.connect(str(db), read_only=True)
    # every stamped call is logged with a distinct CallID; the server operations it caused carry it
    assert con.execute("SELECT count(*) = count(DISTINCT callid) FROM calls").fetchall() == [(True,)]
    ops = dict(con.execute("SELECT func, list(DISTINCT op ORDER BY op) FROM arrows GROUP BY func").fetchall())
    assert ops["MPI_File_set_size"] == ["trove_truncate"]
    assert ops["MPI_File_sync"] == ["trove_flush"]
    assert ops["MPI_File_get_size"] == ["trove_getattr"]
    # only calls that move data have requested bytes (get_size's result is no request)
    sizes = con.execute("SELECT DISTINCT size FROM calls WHERE func = 'MPI_File_get_size'").fetchall()
    assert sizes == [(None,)]
    assert ops["MPI_File_delete"] == ["keyval_write", "trove_remove"]
    assert ops["MPI_File_write"] == ["trove_write"]  # 10000 bytes over 2 datafiles: small I/O
    # striping_factor=2 of 3 servers, strip 4096: each write touches exactly two datafiles
    servers = con.execute("SELECT DISTINCT servers FROM fanout WHERE func = 'MPI_File_write'").fetchall()
    assert servers == [(2,)]
    assert con.execute("SELECT count(*) FROM server_ops WHERE layer = 'req' AND op LIKE 'small_io%'"
                       ).fetchall()[0][0] >= ranks
    con.close()


def test_a_failed_rank_is_not_also_said_to_have_been_stopped(tmp_path):
    from callid.run import _rank_failures

    for name, text in (("rank-1.failed", "exited with status 2"), ("rank-1.stopped", "SIGUSR1"),
                       ("rank-0.stopped", "SIGUSR1")):
        (tmp_path / name).write_text(text)
    assert _rank_failures(tmp_path, 2) == ["rank 1 failed: exited with status 2",
                                           "rank 0 stopped after another rank ended, flushing its log"]


@pytest.mark.slow
@pytest.mark.parametrize(("readers", "others"), [(None, 0o077), ("group", 0o007)])
def test_what_callid_writes_is_its_owners_only_unless_asked(tmp_path, readers, others):
    """Under a umask of 022, everything a run, a merge and a report write (logs, servers' storage and
    metadata, their logs, merged data, the page) is readable by its owner only; ``--readable-by
    group`` lets the group read it too, never others."""
    flag = ["--readable-by", readers] if readers else []
    out = tmp_path / "out"

    def callid(*args) -> None:
        done = subprocess.run([CALLID, *flag, *map(str, args)], capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)), preexec_fn=lambda: os.umask(0o022))
        assert done.returncode == 0, done.stderr

    callid("run", "-d", out, *DEMO)
    callid("merge", out / "client.parquet", out / "server.parquet", "-o", out / "m.duckdb")
    callid("report", out / "m.duckdb", "-o", out / "r.html")
    written = [out, *out.rglob("*")]
    names = {p.name for p in written}
    assert len(written) > 30 and {"meta.sqlite", "io0.log", "r.html", "000000.parquet"} <= names
    wide = [(oct(p.stat().st_mode & 0o777), str(p)) for p in written if p.stat().st_mode & others]
    assert wide == []
