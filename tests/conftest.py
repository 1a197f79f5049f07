"""Shared fixtures: real server processes on loopback, and running the ``callid`` command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from callid.run import RunOptions, ServerGroup, make_config

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
BIN = Path(sys.executable).parent
CALLID = str(BIN / "callid")  # the console script, as users run it


def start_servers(tmp: Path, **options) -> ServerGroup:
    """Start a file system's servers (real processes) under ``tmp``; stop with ``group.stop()``."""
    flush_rows = options.pop("flush_rows", 4096)
    config = make_config(RunOptions(target=[], **options), tmp)
    config.flush_rows = flush_rows
    (tmp / "servers").mkdir(parents=True, exist_ok=True)
    group = ServerGroup(config, tmp / "fs.json", tmp / "servers")
    try:
        group.start()
    except BaseException:
        group.stop()
        raise
    return group


@pytest.fixture(scope="module")
def fs(tmp_path_factory):
    """4 I/O servers, 32 KiB flow buffers, every event flushed at once (so tests can read them)."""
    group = start_servers(tmp_path_factory.mktemp("fs"), servers=4, flow_buffer=32768, flush_rows=1)
    yield group
    assert group.stop() == []


def callid_cmd(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the ``callid`` command as a user would."""
    return subprocess.run([CALLID, *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


def traced(tmp: Path, name: str, *run_args) -> tuple[Path, duckdb.DuckDBPyConnection, dict]:
    """``callid run``, ``merge`` and ``stats --json`` as a user would; the output directory,
    the merged database (open, read-only) and the statistics."""
    import json

    out = tmp / name
    run = callid_cmd("run", "-o", out, *run_args)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "FAILED" not in run.stdout
    db = out / "m.duckdb"
    merge = callid_cmd("merge", out / "client.parquet", out / "server.parquet", "-o", db)
    assert merge.returncode == 0, merge.stderr
    stats = callid_cmd("stats", db, "--json")
    assert stats.returncode == 0, stats.stderr
    return out, duckdb.connect(str(db), read_only=True), json.loads(stats.stdout)
