"""``callid check`` D502 stays quiet on programs whose conflicting accesses MPI orders: the programs
under ``clean/`` (``NP = n`` says how many ranks), run under ``callid run`` and merged, get no error
finding; run with the argument that removes what orders them, they get exactly D502."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.check import checked

CLEAN = Path(__file__).parent / "clean"


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("name", ["sync_barrier_sync", "atomic_mode"])
def test_ordered_accesses_have_no_error_finding(name, tmp_path):
    result = checked(tmp_path / "out", CLEAN / f"{name}.py", must_run=True)
    assert result["counts"]["error"] == 0, json.dumps(result["findings"], indent=1)
    assert result["returncode"] == 0


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize(("name", "arg", "file"), [
    ("sync_barrier_sync", "--no-barrier", "/sync_barrier_sync"),  # the library's file: sync does not order
    ("atomic_mode", "--nonatomic", "/pvfs2/atomic_mode"),
])
def test_without_the_ordering_they_race(name, arg, file, tmp_path):
    result = checked(tmp_path / "out", CLEAN / f"{name}.py", arg, must_run=True)
    races = [f for f in result["findings"] if f["code"] == "D502"]
    assert [f["code"] for f in result["findings"]] == ["D502"], json.dumps(result["findings"], indent=1)
    assert races[0]["file"].endswith(file) and not races[0]["file"].startswith("/pvfs2/sync")
    assert sorted(races[0]["ranks"]) == [0, 1]
