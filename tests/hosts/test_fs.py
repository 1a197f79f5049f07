"""``callid fs init`` and ``callid servers start/stop/status`` on loopback: the configuration and its
owner-only secret, servers that outlive the command that started them, and one-line errors for bad
server lists, missing or world-readable secrets and servers that do not answer."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from callid.run import RunOptions, find_mpiexec, fs_run_config
from callid_core.config import CONFIG_ENV, Config
from callid_core.schema import META_CONFIG
from tests.conftest import ROOT, callid_cmd, cli, query

PROGRAM = Path(__file__).with_name("program.py")


def free_ports(n: int) -> list[int]:
    """``n`` TCP ports of loopback that nothing listens on now."""
    socks = [socket.create_server(("127.0.0.1", 0)) for _ in range(n)]
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def init(tmp: Path, *extra: str) -> Path:
    """A file system of 2 I/O servers on loopback, on free ports; its configuration."""
    meta, io0, io1 = free_ports(3)
    out = tmp / "fs.json"
    spec = f"127.0.0.1:{meta}:meta0,127.0.0.1:{io0}:io0,127.0.0.1:{io1}:io1"
    result = cli("fs", "init", "--servers", spec, "-o", out, *extra)
    assert result.returncode == 0, result.stderr
    return out


def error_line(result) -> str:
    """The one error line of a command that failed, without a traceback."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("callid: error: "), result.stderr
    return lines[0]


def test_fs_init_places_the_servers_and_writes_an_owner_only_secret(tmp_path):
    out = tmp_path / "fs.json"
    result = cli("fs", "init", "--servers", "node1:io0,node2:io1,node1:7000:io2", "-o", out,
                 "--strip-size", "128KiB", "--json")
    assert result.returncode == 0, result.stderr
    config = Config.load(out)
    where = {s.name: (s.host, s.port, s.roles) for s in config.servers}
    assert where == {"meta0": ("node1", 3334, ["meta"]), "io0": ("node1", 3335, ["io"]),
                     "io1": ("node2", 3334, ["io"]), "io2": ("node1", 7000, ["io"])}
    assert [s.name for s in config.io_servers] == ["io0", "io1", "io2"]  # (the striping order)
    assert config.strip_size == 128 * 1024
    assert {s.home for s in config.servers} == {str(tmp_path / "servers" / n) for n in where}
    assert all(s.storage == s.home + "/storage" for s in config.servers)
    secret = Path(config.secret_file)
    assert secret == tmp_path / "fs.secret" and stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert len(config.secret()) == 32
    assert json.loads(result.stdout)["servers"][0] == {
        "server": "meta0", "address": "node1:3334", "roles": ["meta"], "dir": str(tmp_path / "servers/meta0")}
    again = cli("fs", "init", "--servers", "node1:io0", "-o", out)  # (would change the secret)
    assert again.returncode == 2 and "fs.secret: exists" in error_line(again)


@pytest.mark.parametrize(("spec", "message"), [
    ("node1", "'node1' is not HOST:NAME or HOST:PORT:NAME"),
    ("node1:io0,node2:io0", "io0 is placed twice"),
    ("node1:io1", "no io0: the I/O servers are io0 to io0"),
    ("node1:meta1,node1:io0", "'node1:meta1' is not HOST:NAME"),
    ("node1:70000:io0", "port 70000 is not between 1 and 65535"),
    ("node1:5000:io0,node1:5000:io1", "io0 and io1 both at node1:5000"),
    ("node1:meta0", "no I/O server given"),
    (" , ", "no server given"),
])
def test_a_bad_server_list_is_one_line_naming_the_item(tmp_path, spec, message):
    result = cli("fs", "init", "--servers", spec, "-o", tmp_path / "fs.json")
    assert result.returncode == 2
    assert message in error_line(result)
    assert not (tmp_path / "fs.json").exists() and not (tmp_path / "fs.secret").exists()


def test_fs_init_into_a_directory_that_does_not_exist_makes_nothing(tmp_path):
    result = cli("fs", "init", "--servers", "node1:io0", "-o", tmp_path / "typo" / "fs.json")
    assert result.returncode == 2
    assert f"directory {tmp_path / 'typo'} does not exist" in error_line(result)
    assert not (tmp_path / "typo").exists()


def test_servers_outlive_start_answer_and_stop_with_their_logs_kept(tmp_path):
    fs = init(tmp_path)
    home = tmp_path / "servers" / "io0"
    (home / "parts").mkdir(parents=True)
    earlier = home / "parts" / "server-io0.000000.parquet"  # (a log of an earlier start)
    earlier.write_bytes(b"earlier")
    try:
        started = callid_cmd("servers", "start", "--config", fs)
        assert started.returncode == 0, started.stderr
        assert started.stdout.count("started ") == 3
        assert (home / "parts.1" / earlier.name).read_bytes() == b"earlier"  # kept, not replaced
        status = cli("servers", "status", "--config", fs, "--json")
        assert status.returncode == 0, status.stderr
        rows = json.loads(status.stdout)
        assert [(r["server"], r["answers"]) for r in rows] == [("meta0", True), ("io0", True), ("io1", True)]
        pid = json.loads((home / "io0.addr").read_text())["pid"]
        assert rows[1]["process"] == f"process {pid}"
        twice = callid_cmd("servers", "start", "--config", fs, "--name", "io0")
        assert twice.returncode == 1 and f"server io0 runs already (process {pid})" in error_line(twice)
    finally:
        stopped = callid_cmd("servers", "stop", "--config", fs)
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.count("stopped ") == 3
    assert not Path(f"/proc/{pid}").exists() or b"server_sim" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert "shutting down" in (home / "io0.log").read_text()
    status = cli("servers", "status", "--config", fs)
    assert status.returncode == 1 and status.stdout.count("does not answer") == 3
    again = cli("servers", "stop", "--config", fs)
    assert again.returncode == 1 and "no server of" in error_line(again)


@pytest.mark.mpi
@pytest.mark.slow
def test_ranks_of_another_launcher_find_the_servers_through_the_environment(tmp_path):
    """CALLID_CONFIG=fs.json mpiexec ... python -m callid.launch: the ranks log beside fs.json, the
    servers into their directories (flushed at stop); merge takes both."""
    fs = init(tmp_path)
    try:
        assert callid_cmd("servers", "start", "--config", fs).returncode == 0
        launch = [sys.executable, "-m", "callid.launch", str(PROGRAM), "write", "/pvfs2/env"]
        env = dict(os.environ, PYTHONPATH=str(ROOT), **{CONFIG_ENV: str(fs)})
        ranks = subprocess.run([find_mpiexec(), "-n", "2", *launch], env=env, capture_output=True, text=True,
                               timeout=120)
        assert ranks.returncode == 0, ranks.stderr
    finally:
        stopped = callid_cmd("servers", "stop", "--config", fs)
    assert stopped.returncode == 0, stopped.stderr
    merged = cli("merge", tmp_path / "parts", tmp_path / "servers" / "*" / "parts" / "*.parquet",
                 "-o", tmp_path / "m.duckdb")
    assert merged.returncode == 0, merged.stderr
    rows = query(tmp_path / "m.duckdb", "SELECT server, sum(share_bytes) FROM arrows GROUP BY 1 ORDER BY 1")
    assert rows == [("io0", 256 * 1024), ("io1", 256 * 1024), ("meta0", 0)]


def test_a_stale_pid_file_gets_no_signal(tmp_path):
    """A pid file naming a process that is not the server (here: this test) is not the server's."""
    fs = init(tmp_path)
    home = tmp_path / "servers" / "io0"
    home.mkdir(parents=True)
    (home / "io0.addr").write_text(json.dumps({"host": "127.0.0.1", "port": 1, "pid": os.getpid(),
                                               "hostname": socket.gethostname()}))
    result = cli("servers", "stop", "--config", fs, "--name", "io0")
    assert result.returncode == 1
    assert f"server io0 (127.0.0.1:{Config.load(fs).server('io0').port}) is not running on this machine " \
           f"(its process {os.getpid()} has ended)" in error_line(result)


@pytest.mark.parametrize("problem", ["world-readable", "missing"])
def test_a_missing_or_world_readable_secret_is_one_line(tmp_path, problem):
    fs = init(tmp_path)
    secret = tmp_path / "fs.secret"
    if problem == "missing":
        secret.unlink()
    else:
        secret.chmod(0o644)
    for args in (("servers", "start", "--config", fs),
                 ("run", "--fs", fs, "-d", tmp_path / "out", ROOT / "examples" / "callid_demo.py")):
        result = cli(*args)  # (refused: in this process nothing may start)
        assert result.returncode == 2, result.stderr
        line = error_line(result)
        assert str(secret) in line
        assert ("(mode 0600; it is 0644)" if problem == "world-readable" else "No such file") in line


def test_run_fs_names_a_server_that_does_not_answer(tmp_path):
    fs = init(tmp_path)
    meta = Config.load(fs).meta_server
    result = cli("run", "--fs", fs, "-d", tmp_path / "out", ROOT / "examples" / "callid_demo.py")
    assert result.returncode == 1
    assert f"server meta0 at 127.0.0.1:{meta.port} does not answer" in error_line(result)


def test_run_fs_refuses_the_options_the_file_system_fixes(tmp_path):
    fs = init(tmp_path)
    for option, value in (("--strip-size", "1MiB"), ("--servers", "4"), ("--clock-skew", "server:0=+1ms")):
        result = cli("run", "--fs", fs, option, value, ROOT / "examples" / "callid_demo.py")
        assert result.returncode == 2
        assert f"{option}: the file system of --fs has its own (set it with callid fs init)" in \
            error_line(result)


def test_run_fs_wants_a_configuration_of_fs_init(tmp_path):
    from callid.run import RunOptions, make_config

    make_config(RunOptions(target=[]), tmp_path).save(tmp_path / "run.json")  # (one of callid run)
    result = cli("run", "--fs", tmp_path / "run.json", "-d", tmp_path / "out",
                 ROOT / "examples" / "callid_demo.py")
    assert result.returncode == 2
    assert "server meta0 has no directory of its own: not a configuration of callid fs init" in \
        error_line(result)


def test_servers_start_here_needs_an_address_of_this_host(tmp_path):
    out = tmp_path / "fs.json"
    assert cli("fs", "init", "--servers", "192.0.2.77:io0", "-o", out).returncode == 0
    result = cli("servers", "start", "--config", out)
    assert result.returncode == 1
    assert "no server of the file system has an address of this host (they are on 192.0.2.77)" in \
        error_line(result)
    named = callid_cmd("servers", "start", "--config", out, "--name", "io0")  # (it cannot listen there)
    assert named.returncode == 1
    assert "server io0 exited with status 2 at start-up: server_sim: server 'io0' cannot listen on " \
           "192.0.2.77:3335: Cannot assign requested address" in error_line(named)


def test_run_fs_keeps_the_tracers_switches(tmp_path):
    """--flush-rows and --no-trace-* are the run's (its clients'), not the file system's: a run with --fs
    once took the file system's defaults instead, silently."""
    fs = init(tmp_path)
    config = fs_run_config(RunOptions(target=["x.py"], fs=str(fs), flush_rows=1, trace_hints=False,
                                      trace_mpi=False, trace_nested=True), tmp_path / "out")
    assert (config.flush_rows, config.trace_hints, config.trace_mpi, config.trace_nested) == (
        1, False, False, True)


@pytest.mark.mpi
@pytest.mark.slow
def test_fs_init_models_the_devices_and_plants_faults_that_every_run_records(tmp_path):
    """callid fs init --disk-model/--fault: the servers started from its configuration model their disks
    (io1's 4 times as slow), the ranks of a run on it straggle, and the run records both; a fault naming a
    rank the run does not have is refused in one line."""
    fs = init(tmp_path, "--disk-model", "latency=5ms", "--fault", "io1:disk=slow:4x",
              "--fault", "rank1:straggle=200ms")
    config = Config.load(fs)
    assert config.disk_model["latency_s"] == 0.005 and len(config.faults) == 2
    few = cli("run", "--fs", fs, "-n", "1", "-d", tmp_path / "few", ROOT / "examples" / "callid_demo.py")
    assert few.returncode == 2
    assert "its fault rank1:straggle names a rank beyond -n 1 (ranks 0 to 0)" in error_line(few)
    try:
        assert callid_cmd("servers", "start", "--config", fs).returncode == 0
        run = callid_cmd("run", "--fs", fs, "-n", "2", "-d", tmp_path / "out",
                         ROOT / "examples" / "mpi_io_test.py", "-b", "64KiB", "-i", "2")
        assert run.returncode == 0, run.stderr
    finally:
        assert callid_cmd("servers", "stop", "--config", fs).returncode == 0
    out = tmp_path / "out"
    recorded = json.loads(pq.read_schema(out / "client.parquet").metadata[META_CONFIG.encode()])
    assert (recorded["disk_model"], recorded["faults"]) == (config.disk_model, config.faults)
    disk = dict(duckdb.sql(f"SELECT server, min(t_end - t_start) FROM '{out}/server.parquet' "
                           "WHERE op IN ('trove_read', 'trove_write') GROUP BY 1").fetchall())
    assert disk["io0"] >= 5e6 and disk["io1"] >= 20e6, disk
    gaps = duckdb.sql(f"""SELECT t_start - lag(t_end) OVER (ORDER BY t_start) FROM '{out}/client.parquet'
                          WHERE kind = 'call' AND rank = 1""").fetchall()
    assert all(gap >= 0.2e9 for (gap,) in gaps[1:]), gaps
