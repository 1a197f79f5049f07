"""The merge's warning that a rank stopped early: for a rank whose calls ended while most ranks went on,
not for one of two ranks that merely ended at different times (it once said "most" of one of two)."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import callid_cmd, cli

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

EARLY = textwrap.dedent("""
    import time
    from mpi4py import MPI
    rank = MPI.COMM_WORLD.rank
    MPI.COMM_WORLD.Barrier()  # (the ranks start together, whenever their processes came up)
    fh = MPI.File.Open(MPI.COMM_SELF, f"/pvfs2/early.{rank}", MPI.MODE_CREATE | MPI.MODE_WRONLY)
    for i in range(1 if rank == 2 else 20):
        fh.Write_at(i * 10, b"e" * 10)
        time.sleep(0.1)
    fh.Close()
""")
ONE_CALL = textwrap.dedent("""
    import time
    from mpi4py import MPI
    rank = MPI.COMM_WORLD.rank
    MPI.COMM_WORLD.Barrier()
    time.sleep(0.5 * rank)  # (rank 0's one call ends before half the run: half the ranks are not most)
    fh = MPI.File.Open(MPI.COMM_SELF, f"/pvfs2/one.{rank}", MPI.MODE_CREATE | MPI.MODE_WRONLY)
    fh.Close()
""")


@pytest.mark.parametrize(("program", "np", "warned"), [(EARLY, 3, True), (ONE_CALL, 2, False)])
def test_a_rank_stopped_early_is_named_and_only_then(tmp_path, program, np, warned):
    (tmp_path / "p.py").write_text(program)
    out = tmp_path / "out"
    run = callid_cmd("run", "-n", np, "-d", out, tmp_path / "p.py")
    assert run.returncode == 0, run.stderr
    merged = cli("merge", out / "client.parquet", out / "server.parquet", "-o", out / "m.duckdb")
    assert merged.returncode == 0, merged.stderr
    assert ("rank 2 logged no call after the first 50% of the run" in merged.stderr) is warned, merged.stderr
    assert ("logged no call after" in merged.stderr) is warned
