"""``callid sql DB`` on a terminal opens a read-only shell; off a terminal it lists the tables."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import CALLID, ROOT, callid_cmd

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    out = tmp_path_factory.mktemp("shell")
    assert callid_cmd("synth", "--calls", "200", "-d", out).returncode == 0
    merged = out / "m.duckdb"
    assert callid_cmd("merge", out / "client.parquet", out / "server.parquet", "-o", merged).returncode == 0
    return merged


def _read_until(fd: int, marker: str, timeout: float = 30.0) -> str:
    seen = ""
    deadline = time.monotonic() + timeout
    while marker not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen += os.read(fd, 65536).decode(errors="replace")
            except OSError:
                break
    return seen


@contextmanager
def _shell(db: Path) -> Iterator[tuple[int, subprocess.Popen]]:
    """``callid sql DB`` on a terminal (a pty): its terminal's end and the process, killed after."""
    main, child = pty.openpty()
    proc = subprocess.Popen([CALLID, "sql", db], stdin=child, stdout=child, stderr=child,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), start_new_session=True)
    os.close(child)
    try:
        yield main, proc
    finally:
        proc.kill()
        os.close(main)


def test_the_shell_runs_queries_refuses_writes_and_leaves(db, tmp_path):
    with _shell(db) as (main, proc):
        assert "arrows" in _read_until(main, "callid> ")
        os.write(main, b"SELECT count(*) AS n\r")
        os.write(main, b"FROM calls;\r")
        assert "200" in _read_until(main, "callid> ")
        os.write(main, b"COPY calls TO 'stolen.csv';\r")
        assert "refused: callid sql runs queries only" in _read_until(main, "callid> ")
        os.write(main, b".quit\r")
        assert proc.wait(timeout=30) == 0
    assert not (tmp_path / "stolen.csv").exists()


def test_ctrl_c_stops_a_query_and_the_shell_goes_on(db):
    """Ctrl-C during a long query: "query interrupted" and the prompt (it was a traceback)."""
    with _shell(db) as (main, proc):
        _read_until(main, "callid> ")
        os.write(main, b"SELECT 1 AS warm;\r")  # (a first query: the shell is past its start)
        _read_until(main, "callid> ")
        os.write(main, b"SELECT count(*) FROM range(100000000000) t(i) WHERE i % 7 = 3;\r")
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
        seen = _read_until(main, "callid> ")
        assert "callid: query interrupted" in seen and "Traceback" not in seen
        os.write(main, b"SELECT 6 * 7 AS answer;\r")
        assert "42" in _read_until(main, "(1 row)")
        os.write(main, b".quit\r")
        assert proc.wait(timeout=30) == 0


def test_ctrl_c_stops_a_query_off_a_terminal_in_one_line(db):
    """Ctrl-C during ``callid sql DB QUERY``: "callid: interrupted", exit status 130, the query
    stopped before the process ends (it aborted with the query still running: SIGABRT, status -6)."""
    forever = "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t"
    for _ in range(3):  # (the abort came in five of six tries)
        proc = subprocess.Popen([CALLID, "sql", db, forever, "--timeout", "0"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert (proc.returncode, out, err) == (130, "", "callid: interrupted\n")


def test_off_a_terminal_the_tables_are_listed(db):
    result = callid_cmd("sql", db)
    assert result.returncode == 0
    assert "arrows" in result.stdout and "server_ops" in result.stdout
    assert "give QUERY" in result.stderr
