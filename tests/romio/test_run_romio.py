"""``callid run`` of a program on the MPI library, as a user meets it: stopped or killed it leaves no
process (the mount goes with the run's namespace), what is missing is said in one line, an mpi4py
program runs on the library's MPI-IO with ``--mpi-io romio``, and a traced C run replays."""

from __future__ import annotations

import json
import signal
import time

import duckdb
import pytest

from callid.romio.records import records
from tests.conftest import CALLID, EXAMPLES, callid_cmd, traced
from tests.romio.conftest import needs_fuse
from tests.tracked import Tracked

pytestmark = [pytest.mark.mpi, pytest.mark.slow, needs_fuse]


def _start_long(tmp_path, programs) -> tuple[Tracked, object]:
    """A run of 2 ranks writing 1-byte blocks for a long time; once its ranks have written some."""
    out = tmp_path / "out"
    proc = Tracked([CALLID, "run", "-n", 2, "-d", out, programs["mpi-io-test"], "-b", 1, "-i", 10_000_000,
                    "-f", "/pvfs2/long"], grace=15, within=tmp_path, cwd=tmp_path)
    def written(rank: int) -> int:  # (a file grows in windows of zeros: count the whole records)
        rec = out / "parts" / f"romio-rank{rank:06d}.rec"
        return len(records(rec)) if rec.exists() else 0

    deadline = time.monotonic() + 60
    while min(written(0), written(1)) < 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    return proc, out


def test_sigterm_stops_the_ranks_and_the_mount_and_keeps_the_records(tmp_path, programs):
    proc, out = _start_long(tmp_path, programs)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.strip().splitlines()[-1].startswith("callid: error: stopped by SIGTERM"), err
    assert "Traceback" not in err
    assert proc.leftovers == []  # no rank, no FUSE client, no server
    writes = duckdb.sql(f"SELECT rank, count(*) FROM '{out}/client.parquet' WHERE func = 'MPI_File_write_at' "
                        "GROUP BY rank ORDER BY rank").fetchall()
    assert [r for r, _ in writes] == [0, 1] and min(n for _, n in writes) >= 100


def test_a_killed_run_leaves_no_process(tmp_path, programs):
    proc, _ = _start_long(tmp_path, programs)
    proc.kill()
    proc.communicate(timeout=120)
    assert proc.leftovers == []


def test_what_is_missing_is_said_in_one_line(tmp_path, programs):
    done = callid_cmd("run", "-n", 2, "-d", tmp_path / "out", "--mpicc", tmp_path / "no-mpicc",
                      programs["mpi-io-test"])
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [f"callid: error: --mpicc: {tmp_path / 'no-mpicc'} is not an "
                                                "executable"]
    source = tmp_path / "app.c"  # (a program not built yet)
    source.write_text("int main(void) { return 0; }\n")
    done = callid_cmd("run", "-n", 2, "-d", tmp_path / "out", source)
    assert (done.returncode, done.stderr.strip()) == (
        2, f"callid: error: {source}: is not an executable (build the program with mpicc, or chmod +x it)")
    done = callid_cmd("run", "-n", 2, "-d", tmp_path / "out", "--mpi-io", "callid", programs["mpi-io-test"])
    assert done.returncode == 2 and "is not a Python program" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_mpi4py_program_on_the_mpi_librarys_mpi_io(tmp_path):
    run = traced(tmp_path, "py", "--mpi-io", "romio", "-n", 2, EXAMPLES / "mpi_io_test.py", "-b", "64KiB",
                 "-i", 2, "-f", "/pvfs2/py")
    funcs = dict(run.q("SELECT func, count(*) FROM calls GROUP BY func"))
    assert funcs["MPI_File_write_at"] == funcs["MPI_File_read_at"] == 4
    assert run.q("SELECT count(*) FILTER (WHERE NOT exact), sum(share_bytes) FROM arrows WHERE func = "
                 "'MPI_File_write_at'") == [(0, 4 * 65536)]
    assert json.loads(run.out.joinpath("fs.json").read_text())["mpi_io"] == "romio"


def test_a_traced_c_run_replays(tmp_path, programs):
    run = traced(tmp_path, "c", "-n", 4, programs["mpi-io-test"], "-b", 100_000, "-i", 2, "-f", "/pvfs2/r")
    replay = tmp_path / "replay"
    done = callid_cmd("replay", run.out / "client.parquet", "-d", replay)
    assert done.returncode == 0, done.stderr
    merged = callid_cmd("merge", replay / "client.parquet", replay / "server.parquet", "-o", replay / "m.db")
    assert merged.returncode == 0, merged.stderr
    con = duckdb.connect(str(replay / "m.db"), read_only=True)
    query = ("SELECT func, count(*), sum(size) FROM calls WHERE func IN ('MPI_File_write_at', "
             "'MPI_File_read_at') GROUP BY func ORDER BY func")
    assert con.execute(query).fetchall() == run.q(query) == [("MPI_File_read_at", 8, 800_000),
                                                            ("MPI_File_write_at", 8, 800_000)]
