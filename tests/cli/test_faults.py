"""Faults during a run: a rank or a server killed with SIGKILL, the run stopped with SIGTERM or killed.

Each counts the events that reached the logs and the processes left behind: the killed process
loses at most its last second of events (logs are written by time), every other one flushes on the
way down, nothing is left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import duckdb
import pytest

from tests.conftest import CALLID, ROOT, callid_cmd, cli, fill
from tests.tracked import Tracked

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

#: each rank opens a file and writes WRITES blocks; then what argv[1] says, on rank 1
PROGRAM = """\
import os, signal, sys, time
from mpi4py import MPI
comm = MPI.COMM_WORLD
f = MPI.File.Open(comm, "/pvfs2/faults", MPI.MODE_CREATE | MPI.MODE_RDWR)
for i in range(WRITES):
    f.Write_at((comm.rank * WRITES + i) * 4096, bytearray(4096))
print(f"rank {comm.rank} wrote", flush=True)
comm.Barrier()  # (every rank has written all its blocks before anything happens)
mode = sys.argv[1]
if mode == "kill" and comm.rank == 1:
    time.sleep(2)  # (its writes are more than a second old when it is killed)
    os.kill(os.getpid(), signal.SIGKILL)
if mode == "wait":
    time.sleep(600)
while mode == "loop":  # (writing on both servers until something fails)
    f.Write_at(comm.rank * 131072, bytearray(131072))
    time.sleep(0.01)
comm.Barrier()
f.Close()
if mode == "idle":  # (the file system's work is done; the ranks end 8 s later: under load their lines
    print(f"rank {comm.rank} closed", flush=True)  # can reach the test seconds late)
    time.sleep(8)
"""
WRITES = 30


def _start(tmp_path: Path, mode: str, ranks: int = 3) -> tuple[Tracked, Path]:
    """``callid run`` of the program; what it started and left running 15 s after it ended are its
    ``leftovers`` (tests.tracked: its own descendants only)."""
    prog = tmp_path / "faults.py"
    prog.write_text(PROGRAM.replace("WRITES", str(WRITES)))
    out = tmp_path / "out"
    proc = Tracked([CALLID, "run", "-n", str(ranks), "-d", out, prog, mode], grace=15, within=tmp_path,
                   cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return proc, out


def _wait_written(proc: Tracked, ranks: int) -> None:
    """Until every rank has written its blocks (they print a line each)."""
    seen = 0
    while seen < ranks:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        seen += line.count("wrote")  # (two ranks' lines can arrive interleaved on one)


def _writes(out: Path) -> dict[int, int]:
    rows = duckdb.sql(f"SELECT rank, count(*) FROM '{out}/client.parquet' WHERE kind = 'call' "
                      "AND func = 'MPI_File_write_at' GROUP BY rank").fetchall()
    return dict(rows)


def test_a_killed_rank_is_named_and_the_others_keep_their_events(tmp_path):
    proc, out = _start(tmp_path, "kill")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    last = err.strip().splitlines()[-1]
    assert "rank 1 failed: killed by SIGKILL" in last, err
    assert "ranks 0, 2 (2 ranks) stopped after another rank ended, flushing their logs" in last
    assert "Traceback" not in err
    writes = _writes(out)
    assert writes == {0: WRITES, 1: WRITES, 2: WRITES}  # the killed rank's were on disk by time
    assert proc.leftovers == []
    merged = callid_cmd("merge", out / "client.parquet", out / "server.parquet", "-o", out / "m.db", "--json")
    assert json.loads(merged.stdout)["warnings"] == []  # (every call of rank 1 logged, none lost)


def test_sigterm_stops_ranks_and_servers_which_flush(tmp_path):
    proc, out = _start(tmp_path, "wait", ranks=2)
    _wait_written(proc, 2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert err.strip().splitlines()[-1].startswith("callid: error: stopped by SIGTERM: ranks and servers")
    assert _writes(out) == {0: WRITES, 1: WRITES}
    servers = duckdb.sql(f"SELECT server, count(*) FROM '{out}/server.parquet' GROUP BY server").fetchall()
    assert {s for s, _ in servers} >= {"meta0", "io0", "io1"}
    assert proc.leftovers == []


def test_a_killed_server_is_named_and_nothing_is_left(tmp_path):
    proc, out = _start(tmp_path, "wait", ranks=2)
    _wait_written(proc, 2)
    [pid] = [pid for pid, args in proc.descendants().items() if "server_sim serve" in args
             and f"--config {out}/fs.json --name io1 " in args]
    time.sleep(2)  # (its events of the writes are more than a second old when it is killed)
    proc.send_signal(signal.SIGKILL, pid)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)  # (the ranks sleep: nothing else would end the run)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "Traceback" not in err
    assert f"server io1 was killed by SIGKILL (see {out}/servers/io1.log)" in err, err
    assert _writes(out) == {0: WRITES, 1: WRITES}
    disk = dict(duckdb.sql(f"SELECT server, count(*) FROM '{out}/server.parquet' WHERE op = 'trove_write' "
                           "GROUP BY server").fetchall())
    assert disk.keys() == {"io0", "io1"} and sum(disk.values()) == 2 * WRITES  # io1 lost none of its writes
    assert proc.leftovers == []


def test_a_server_stopped_when_the_run_ends_keeps_what_it_logged(tmp_path):
    """io1 SIGSTOPped after the ranks' I/O, so that it cannot stop when the run ends: it is killed,
    named, and the events it logged more than a second before it stopped are in the log."""
    proc, out = _start(tmp_path, "idle", ranks=2)
    _wait_written(proc, 2)
    assert "closed" in proc.stdout.readline() + proc.stdout.readline()
    [pid] = [pid for pid, args in proc.descendants().items() if "server_sim serve" in args
             and f"--config {out}/fs.json --name io1 " in args]
    time.sleep(2)
    proc.send_signal(signal.SIGSTOP, pid)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith(
        "callid: error: server io1 did not stop within 20 s and was killed (the events logged before are in ")
    assert _writes(out) == {0: WRITES, 1: WRITES}
    disk = dict(duckdb.sql(f"SELECT server, count(*) FROM '{out}/server.parquet' WHERE op = 'trove_write' "
                           "GROUP BY server").fetchall())
    assert disk.keys() == {"io0", "io1"} and sum(disk.values()) == 2 * WRITES
    assert proc.leftovers == []


def test_a_killed_mpiexec_loses_no_event_older_than_a_second(tmp_path):
    proc, out = _start(tmp_path, "wait", ranks=2)
    _wait_written(proc, 2)
    [pid] = [pid for pid, args in proc.descendants().items() if "mpiexec" in args.split(" ", 1)[0]]
    time.sleep(2)
    proc.send_signal(signal.SIGKILL, pid)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "Traceback" not in err
    assert _writes(out) == {0: WRITES, 1: WRITES}
    assert proc.leftovers == []


def test_a_killed_run_leaves_no_process(tmp_path):
    proc, out = _start(tmp_path, "wait", ranks=2)
    _wait_written(proc, 2)
    proc.kill()
    proc.communicate(timeout=60)
    assert proc.leftovers == []


def test_ctrl_c_in_a_merge_stops_it_in_one_line_and_installs_nothing(tmp_path):
    """SIGINT at any moment of a merge: exit 130, "callid: interrupted", no partial output and no
    temporary left (DuckDB once swallowed the interrupt, or turned it into a "Query interrupted"
    traceback)."""
    assert callid_cmd("synth", "--calls", "100000", "--ranks", "16", "-d", tmp_path / "s").returncode == 0
    logs = [tmp_path / "s" / "client.parquet", tmp_path / "s" / "server.parquet"]
    out = tmp_path / "m"
    out.mkdir()
    for delay in (0.4, 1.0, 1.6):
        proc = subprocess.Popen([CALLID, "merge", *map(str, logs), "-o", "m.duckdb"], cwd=out, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=dict(os.environ, PYTHONPATH=str(ROOT)))
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        left = {p.name for p in out.iterdir()}
        if proc.returncode == 0:  # (it ended before the signal: a whole output)
            assert left == {"m.duckdb", "m.duckdb.data"}
            break
        assert (proc.returncode, err.strip().splitlines()[-1]) == (130, "callid: interrupted"), err
        assert "Traceback" not in err
        if left:  # (the signal came once the output was whole: it stays, and opens)
            assert left == {"m.duckdb", "m.duckdb.data"} and cli("stats", out / "m.duckdb").returncode == 0
            break


def _rank_processes(proc: Tracked, rank: int) -> dict[int, int]:
    """The ``callid.launch`` processes of ``rank``: process id -> its parent's."""
    found = {}
    for pid, args in proc.descendants().items():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if "callid.launch" in args and f"PMI_RANK={rank}".encode() in environ:
            found[pid] = ppid
    return found


def test_a_killed_keeper_stops_its_rank_and_the_run(tmp_path):
    """SIGKILL to the process mpiexec started for rank 1 (which waits for the rank): the rank stops
    with its log flushed and says why, the other rank is told; the run ends at once (it hung until
    the program ended), nothing is left."""
    proc, out = _start(tmp_path, "wait", ranks=2)
    _wait_written(proc, 2)
    launched = _rank_processes(proc, 1)
    [keeper] = [pid for pid, parent in launched.items() if parent not in launched]
    proc.send_signal(signal.SIGKILL, keeper)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    last = err.strip().splitlines()[-1]
    assert f"rank 1 failed: its process {keeper}, the one mpiexec started, died (killed?)" in last, err
    assert "rank 0 stopped after another rank ended, flushing its log" in last
    assert "Traceback" not in err
    assert _writes(out) == {0: WRITES, 1: WRITES}
    assert proc.leftovers == []


def test_a_second_sigterm_changes_nothing(tmp_path):
    """Two SIGTERMs (a user, then a batch system): the run stops once, cleanly, and says so (the
    second once killed callid run while it stopped its ranks or wrote the logs)."""
    proc, out = _start(tmp_path, "wait", ranks=2)
    _wait_written(proc, 2)
    proc.send_signal(signal.SIGTERM)
    for _ in range(10):
        time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert err.strip().splitlines()[-1].startswith("callid: error: stopped by SIGTERM: ranks and servers")
    assert _writes(out) == {0: WRITES, 1: WRITES}
    assert proc.leftovers == []


def test_a_server_killed_under_the_ranks_io_is_one_line(tmp_path):
    """io1 killed while the ranks write: each rank's failure is one line (its traceback in a file),
    not a Python traceback on the terminal."""
    proc, out = _start(tmp_path, "loop", ranks=2)
    _wait_written(proc, 2)
    [pid] = [pid for pid, args in proc.descendants().items() if "server_sim serve" in args
             and f"--config {out}/fs.json --name io1 " in args]
    proc.send_signal(signal.SIGKILL, pid)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert "server io1" in last and "(traceback in " in last and "rank-" in last, err
    assert "SimIOError" in last and "rank 0 failed" in last and "rank 1 failed" in last, err
    assert proc.leftovers == []


@pytest.mark.parametrize("tmpfs", [2 << 20], indirect=True)
def test_a_run_on_a_full_disk_is_one_line(tmpfs):
    """The run's directory on a disk with 150 KiB free: its servers' storage fills, then its logs
    cannot be written; one line says so and where the parts are (a pyarrow traceback once, and the
    ranks' tracebacks of the full disk)."""
    fill(tmpfs, 150 << 10)
    prog = tmpfs.parent / "faults.py"
    prog.write_text(PROGRAM.replace("WRITES", str(WRITES)))
    proc = Tracked([CALLID, "run", "-n", "2", "-d", tmpfs / "r", prog, "ok"], grace=15, within=tmpfs.parent,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "No space left on device" in err or "ENOSPC" in err, err
    assert proc.leftovers == []
