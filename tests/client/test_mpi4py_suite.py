"""mpi4py's own test_io and test_file, through ``callid run``, on the simulated file system.

The tests come from the sdist of the installed mpi4py, downloaded at test time
(never committed).  Their files are created under a private TMPDIR that the run
mounts, so every file they open lives on the simulated file system.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import duckdb
import mpi4py
import pytest

from tests.conftest import callid_cmd

pytestmark = [pytest.mark.mpi, pytest.mark.network, pytest.mark.slow]


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    """The test/ folder of the installed mpi4py's sdist."""
    tmp = tmp_path_factory.mktemp("mpi4py-sdist")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps",
         "--dest", str(tmp), f"mpi4py=={mpi4py.__version__}"], capture_output=True, text=True)
    assert result.returncode == 0, f"cannot download the mpi4py {mpi4py.__version__} sdist: {result.stderr}"
    (sdist,) = tmp.glob("mpi4py-*.tar.gz")
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if "/test/" in m.name]
        tar.extractall(tmp, members=members, filter="data")
    (test_dir,) = tmp.glob("mpi4py-*/test")
    return test_dir


def _run(suite: Path, tmp: Path, ranks: int, simulated: bool) -> subprocess.CompletedProcess:
    files = tmp / "files"
    files.mkdir()
    args = ["run", "-n", ranks, "-d", tmp / "out"] + (["--mount", files] if simulated else [])
    env_tmp = {"TMPDIR": str(files)}
    result = subprocess.run([str(Path(sys.executable).parent / "callid"), *map(str, args),
                             "-m", "unittest", "test_io", "test_file"],
                            cwd=suite, capture_output=True, text=True, timeout=900,
                            env=dict(os.environ, **env_tmp))
    return result


def _assert_passed(result: subprocess.CompletedProcess, ranks: int) -> None:
    """Every rank ran the whole suite and none failed.

    The ranks share one stderr, so a rank's closing "OK" can land in the middle of
    another's line: the verdict is the exit status (unittest's is non-zero on any
    failure) and the absence of FAILED, not the count of lines starting with OK.
    """
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("Ran 89 tests") == ranks, result.stderr[-3000:]
    assert "FAILED" not in result.stderr, result.stderr[-3000:]


# (2 ranks, as the pass-through test below: test_io alone took 39 s on 2 ranks, 73 s on 3 and 119 s on 4,
# on 2 cores that the ranks share with the servers; the suite runs on two processes beside it. 1 rank
# runs the tests each of these ranks runs.)
@pytest.mark.parametrize("ranks", [2])
def test_mpi4py_io_tests_pass_on_the_simulated_file_system(suite, tmp_path, ranks):
    result = _run(suite, tmp_path, ranks, simulated=True)
    _assert_passed(result, ranks)
    out = tmp_path / "out"
    merged = callid_cmd("merge", out / "client.parquet", out / "server.parquet", "-o", out / "m.duckdb")
    assert merged.returncode == 0, merged.stderr
    con = duckdb.connect(str(out / "m.duckdb"), read_only=True)
    q = lambda sql: con.execute(sql).fetchall()[0]  # noqa: E731
    # every call is stamped, every data access names its offset and bytes,
    # and every disk operation is attributed to the call that caused it
    assert q("SELECT count(*), count(callid), count(DISTINCT callid) FROM calls")[0] > 1000
    assert q("SELECT count(*) = count(callid) AND count(*) = count(DISTINCT callid) FROM calls") == (True,)
    assert q("""SELECT count(*) FROM calls
                WHERE (func LIKE 'MPI_File_%read%' OR func LIKE 'MPI_File_%write%') AND func NOT LIKE '%_end'
                AND (bytes IS NULL OR file_offset IS NULL) AND error IS NULL""") == (0,)
    assert q("SELECT count(*) FROM server_ops WHERE layer IN ('trove', 'meta')")[0] > 1000
    assert q("SELECT count(*) FROM server_ops WHERE len(callids) = 0") == (0,)  # every layer
    assert q("""SELECT count(*) FROM server_ops s WHERE layer IN ('trove', 'meta') AND NOT EXISTS
                (SELECT 1 FROM arrows a WHERE a.server = s.server AND a.event_id = s.event_id)""") == (0,)
    con.close()
    # mpi4py's own tests use MPI-IO correctly: callid check finds no error in them
    check = callid_cmd("check", out / "m.duckdb", "--json")
    assert check.returncode == 0, check.stdout[-3000:]
    assert json.loads(check.stdout)["counts"]["error"] == 0


def test_mpi4py_io_tests_pass_on_the_pass_through_path(suite, tmp_path):
    result = _run(suite, tmp_path, 2, simulated=False)
    _assert_passed(result, 2)
    out = tmp_path / "out"
    con = duckdb.connect()
    log = f"'{out / 'client.parquet'}'"
    calls, distinct, rpcs, waits, matched = con.execute(f"""
        SELECT count(*) FILTER (WHERE kind = 'call'), count(DISTINCT callid) FILTER (WHERE kind = 'call'),
               count(*) FILTER (WHERE kind = 'rpc'), count(*) FILTER (WHERE kind = 'wait'),
               count(*) FILTER (WHERE kind = 'wait'
                                AND callid IN (SELECT callid FROM {log} WHERE kind = 'call'))
        FROM {log}""").fetchall()[0]
    assert calls > 1000 and distinct == calls  # every call stamped once
    assert waits > 0 and matched == waits  # the completions of real non-blocking calls, with their CallIDs
    assert rpcs == 0  # real MPI-IO: no server involved
