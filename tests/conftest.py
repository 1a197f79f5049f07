"""Shared fixtures: real server processes on loopback, running the ``callid`` command, and the
traced runs several test modules share (run once per session).

Markers (``pytest -m "not slow" -n 2`` is the fast lane, on two processes): ``mpi`` runs ranks under
mpiexec, ``browser`` drives headless Chromium, ``network`` downloads from the package registry,
``slow`` takes more than a few seconds.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import sysconfig
import traceback
import venv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import hypothesis
import pytest

from callid.run import RunOptions, ServerGroup, make_config
from callid_core.config import DEFAULT_FLUSH_ROWS

# No test asserts a time: Hypothesis' default deadline (200 ms per example) failed a property test on a
# loaded machine (CI beside another run).
hypothesis.settings.register_profile("callid", deadline=None)
hypothesis.settings.load_profile("callid")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
BIN = Path(sys.executable).parent
CALLID = str(BIN / "callid")  # the console script, as users run it


def start_servers(tmp: Path, **options) -> ServerGroup:
    """Start a file system's servers (real processes) under ``tmp``; stop with ``group.stop()``."""
    flush_rows = options.pop("flush_rows", DEFAULT_FLUSH_ROWS)
    config = make_config(RunOptions(target=[], **options), tmp)
    config.flush_rows = flush_rows
    (tmp / "servers").mkdir(parents=True, exist_ok=True)
    group = ServerGroup(config, tmp / "fs.json", tmp / "servers")
    group.start()  # (stops what it started if it fails)
    return group


@pytest.fixture(scope="module")
def fs(tmp_path_factory):
    """4 I/O servers, 32 KiB flow buffers, every event flushed at once (so tests can read them)."""
    group = start_servers(tmp_path_factory.mktemp("fs"), servers=4, flow_buffer=32768, flush_rows=1)
    yield group
    assert group.stop() == []


def callid_cmd(*args: str, cwd: Path | None = None, timeout: float = 300,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the ``callid`` command as a user would (``env``: variables added to the environment)."""
    return subprocess.run([CALLID, *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), **(env or {})))


def _no_process(self, args, *_, **__) -> None:
    """``subprocess.Popen.__init__`` while :func:`cli` runs a command: in the test process it starts none."""
    raise AssertionError(f"in the test process a command starts no process ({args}): use callid_cmd")


def cli(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``callid ARGS`` run in this process (no interpreter to start: the fast lane's command-line
    tests), as the console script runs it: ``callid.cli.main`` with ``sys.argv``, so errors take the
    same path (one line, the exit status of their class).  Its exit status, standard output and
    standard error (apart) in a ``CompletedProcess``, like :func:`callid_cmd`; an exception that escapes
    ``main`` is a traceback on standard error and exit status 1, as Python's.  ``timeout`` is not
    enforced.  ``CALLID_TESTS_SUBPROCESS=1`` runs the console script instead.

    Not for what starts processes (``run``, ``replay``, ``servers start``, ``demo``, ``merge --engine
    spark``): starting one fails here (:func:`_no_process`), so a refusal of those commands may run here,
    and is shown to come before anything started.  Nor ``sql`` on a database: it locks the
    configuration of the database it opens, which DuckDB shares among the connections of one process
    to one file (a session fixture's too)."""
    args = tuple(map(str, args))
    if os.environ.get("CALLID_TESTS_SUBPROCESS") == "1":
        return callid_cmd(*args, cwd=cwd, timeout=timeout)
    assert args[:1] != ("sql",) or not any(map(os.path.exists, args[1:])), "callid sql DB: use callid_cmd"
    from callid.cli import main

    out, err = io.BytesIO(), io.BytesIO()
    streams = sys.stdin, sys.stdout, sys.stderr
    argv, here, entry = sys.argv, os.getcwd(), sys.modules["__main__"]
    package = entry.__dict__.get("__package__")
    # (held to the end: a wrapper collected closes its buffer)
    wrapped = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.TextIOWrapper(out, encoding="utf-8"),
               io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace"))
    sys.stdin, sys.stdout, sys.stderr = wrapped
    popen, subprocess.Popen.__init__ = subprocess.Popen.__init__, _no_process
    sys.argv = ["callid", *args]
    entry.__package__ = None  # (as in a console script: the program is named by argv[0], not "python -m")
    code = 0
    try:
        if cwd is not None:
            os.chdir(cwd)
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    except Exception:  # (what Python prints for an exception that escapes the program)
        traceback.print_exc()
        code = 1
    finally:
        for stream in wrapped[1:]:
            stream.flush()
        os.chdir(here)
        subprocess.Popen.__init__ = popen
        entry.__package__ = package
        sys.argv = argv
        sys.stdin, sys.stdout, sys.stderr = streams
    return subprocess.CompletedProcess(["callid", *args], code, out.getvalue().decode("utf-8", "replace"),
                                       err.getvalue().decode("utf-8", "replace"))


def layered_venv(env_dir: Path, *paths: Path | str) -> tuple[Path, Path]:
    """A virtual environment without pip whose packages are ``paths`` then this environment's (a ``.pth``
    file): its python and its own site-packages."""
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "layers.pth").write_text("".join(f"{p}\n" for p in (*paths, sysconfig.get_paths()["purelib"])))
    return python, site


def query(db: Path | str, sql: str) -> list[tuple]:
    """The rows of ``sql`` on the database ``db``, opened read-only for this one query."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@dataclass
class Traced:
    """A traced run, merged: its output directory, merged database (open, read-only),
    statistics (``callid stats --json``) and the ranks' standard output."""

    out: Path
    con: duckdb.DuckDBPyConnection
    stats: dict
    stdout: str

    @property
    def db(self) -> Path:
        return self.out / "m.duckdb"

    def q(self, sql: str) -> list[tuple]:
        return self.con.execute(sql).fetchall()


def traced(tmp: Path, name: str, *run_args) -> Traced:
    """``callid run`` as a user would (the console script), then ``merge`` and ``stats --json``
    (in this process: :func:`cli`)."""
    out = tmp / name
    run = callid_cmd("run", "-d", out, *run_args)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "FAILED" not in run.stdout
    db = out / "m.duckdb"
    merge = cli("merge", out / "client.parquet", out / "server.parquet", "-o", db)
    assert merge.returncode == 0, merge.stderr
    stats = cli("stats", db, "--json")
    assert stats.returncode == 0, stats.stderr
    return Traced(out, duckdb.connect(str(db), read_only=True), json.loads(stats.stdout), run.stdout)


#: the thesis demo: 2 ranks, 2 I/O servers, 64 KiB strips and flow buffers
DEMO = ["-n", "2", "--servers", "2", "--strip-size", "64KiB", "--flow-buffer", "64KiB",
        EXAMPLES / "callid_demo.py"]
#: a collective write and read of 4 ranks through one aggregator, in 1 KiB blocks: the
#: aggregator's pieces are small I/O and every disk operation serves all 4 calls (fan-in)
COLLECTIVE_FANIN = ["-n", "4", EXAMPLES / "collective_write.py", "--block", "1KiB", "--blocks", "2",
                    "--cb-nodes", "1"]


@pytest.fixture(scope="session")
def demo(tmp_path_factory) -> Traced:
    """The thesis demo, traced and merged once for every test that reads it."""
    return traced(tmp_path_factory.mktemp("demo"), "out", *DEMO)


@pytest.fixture(scope="session")
def collective_fanin(tmp_path_factory) -> Traced:
    """:data:`COLLECTIVE_FANIN`, traced and merged once for every test that reads it."""
    return traced(tmp_path_factory.mktemp("collective"), "out", *COLLECTIVE_FANIN)


@pytest.fixture
def tmpfs(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A tmpfs of ``request.param`` bytes, mounted for the test (root only: skipped elsewhere)."""
    where = tmp_path / "disk"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={request.param}", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path, leave: int) -> None:
    """Fill ``disk`` up to ``leave`` bytes free."""
    info = os.statvfs(disk)
    with open(disk / "filler", "wb") as f:
        os.posix_fallocate(f.fileno(), 0, info.f_bavail * info.f_frsize - leave)
