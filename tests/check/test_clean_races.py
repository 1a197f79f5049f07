"""``callid check`` D502 and D503 stay quiet on programs whose conflicting accesses MPI orders: the
programs under ``clean/`` (``NP = n`` says how many ranks), run under ``callid run`` and merged, get no
finding; run with the argument that removes what orders them, they get exactly D502 (D503 in atomic
mode)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.check import checked

CLEAN = Path(__file__).parent / "clean"


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("name", ["sync_barrier_sync", "atomic_mode"])
def test_ordered_accesses_have_no_finding(name, tmp_path):
    result = checked(tmp_path / "out", CLEAN / f"{name}.py", must_run=True)
    assert result["findings"] == [], json.dumps(result["findings"], indent=1)
    assert result["returncode"] == 0


@pytest.mark.mpi
@pytest.mark.slow
def test_atomic_mode_without_an_order_is_a_warning_not_a_race(tmp_path):
    result = checked(tmp_path / "out", CLEAN / "atomic_mode.py", "--unordered", must_run=True)
    assert [f["code"] for f in result["findings"]] == ["D503"], json.dumps(result["findings"], indent=1)
    (f,) = result["findings"]
    assert sorted(f["ranks"]) == [0, 1] and f["file"] == "/pvfs2/atomic_mode" and result["returncode"] == 0
    assert "in atomic mode" in f["detail"] and "overlap from byte 2 to 3" in f["detail"]


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
