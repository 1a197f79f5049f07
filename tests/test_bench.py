"""The benchmarks' baselines measure real work (not a test of speed: their baselines must be sound)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("baseline", ["raw", "floor"])
def test_the_fs_benchmark_baselines_move_real_bytes(baseline, tmp_path):
    """``bench fs``'s baselines run to their end (the floor checks what it reads back; any
    failed process is an error, not a figure)."""
    from bench import fs

    write, read = getattr(fs, baseline)(2, 2, 64 * 1024, 256 * 1024, 4, tmp_path)
    assert write > 0 and read > 0
    assert list(tmp_path.iterdir()) == []  # the datafiles are removed


def _finding(code: str, severity: str, family: str, servers=(), ranks=(), **numbers) -> dict:
    return {"code": code, "severity": severity, "family": family, "servers": list(servers),
            "ranks": list(ranks), "numbers": numbers}


def test_the_diagnosis_is_scored_by_the_first_high_finding():
    """named: the first high finding (in callid's order) names the cause; named lower: it is there, after
    another high one (or only a warning); missed; a control with a high finding is a false alarm."""
    from bench.diagnose import CAUSES, score
    from pipeline.insights import in_order

    slow = next(c for c in CAUSES if c.name == "slow-disk")
    disks = _finding("S813", "high", "faults", ["io1"], part="disks", impact=0.6)
    symptom = _finding("P706", "high", "client", ranks=[0, 1], impact=0.3)
    assert score(slow, in_order([symptom, disks])) == ("named", [])
    wrong = _finding("S813", "high", "faults", ["io0"], part="disks", impact=0.7)
    assert score(slow, in_order([wrong, disks])) == ("named lower", ["S813 (io0, disks)"])
    assert score(slow, [_finding("S813", "warning", "faults", ["io1"], part="disks")]) == ("named lower", [])
    assert score(slow, [symptom]) == ("missed", ["P706 (rank 0, rank 1)"])
    assert score(None, [symptom]) == ("false alarm", ["P706 (rank 0, rank 1)"])
    assert score(None, [_finding("P704", "info", "client")]) == ("clean", [])


@pytest.mark.mpi
@pytest.mark.slow
def test_the_diagnose_benchmark_names_a_planted_slow_disk(tmp_path):
    """``python -m bench diagnose`` on one cause and one workload: the control is clean, the slow disk
    named first; its table and JSON line say so."""
    import json
    import subprocess
    import sys

    from tests.conftest import ROOT

    done = subprocess.run([sys.executable, "-m", "bench", "diagnose", "--causes", "slow-disk", "--workloads",
                           "collective"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (result["runs"], result["named"], result["clean"], result["target_met"]) == (2, 1, 1, True), result
    assert "slow-disk" in done.stdout and "named" in done.stdout
