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


def test_drishti_is_scored_like_callid_from_the_codes_it_raised():
    """drishti-io's codes in its order, each at its fixed level: named when the first HIGH one is expected,
    named lower behind another HIGH one (or at WARN), missed; a HIGH code on a control is a false alarm."""
    from bench.diagnose import CAUSES, score_drishti

    misaligned = next(c for c in CAUSES if c.name == "misaligned")
    assert score_drishti(misaligned, ["P08", "P12", "M06"]) == ("named", [])
    assert score_drishti(misaligned, ["P05", "P08"]) == ("named lower", ["P05"])
    assert score_drishti(misaligned, ["P18", "P19"]) == ("missed", ["P18", "P19"])
    rewrites = next(c for c in CAUSES if c.name == "redundant-writes")
    assert score_drishti(rewrites, ["P10", "M07"]) == ("named lower", [])  # (P10 is WARN: never named)
    assert score_drishti(None, ["P12", "M06"]) == ("clean", [])
    assert score_drishti(None, ["P12", "P19"]) == ("false alarm", ["P19"])
    assert all(not c.drishti for c in CAUSES if c.kind == "fault" and c.name != "straggler")


@pytest.mark.mpi
def test_the_darshan_log_of_a_run_holds_its_calls_and_what_drishti_reads(tmp_path):
    """bench.run_log: a real run's data calls as DXT_MPIIO segments and MPI-IO counters (collective or
    independent), its POSIX layer (independent calls: the calls' own accesses) with the accesses off the
    strip size counted as not aligned, and Darshan's reduction of a file every rank opened; PyDarshan
    reads it back."""
    import darshan

    from bench.run_log import write_run_log
    from tests.conftest import EXAMPLES, traced

    run = traced(tmp_path, "out", "-n", 2, "--servers", 2, "--strip-size", "64KiB",
                 EXAMPLES / "mpi_io_test.py", "-b", "100000", "-i", "2")
    calls = run.q("SELECT rank, file_offset, size, func LIKE '%read%' FROM calls WHERE func LIKE '%_at' "
                  "ORDER BY rank, t_start")
    assert len(calls) == 8  # (2 ranks x 2 iterations, written then read)
    log = tmp_path / "run.darshan"
    write_run_log(run.out / "m.duckdb", log)
    report = darshan.DarshanReport(str(log), read_all=True)
    segments = sorted((rec["rank"], s["offset"], s["length"], kind == "read_segments")
                      for rec in report.records["DXT_MPIIO"].to_df()
                      for kind in ("write_segments", "read_segments") for s in rec[kind].to_dict("records"))
    assert segments == sorted(calls)
    (mpiio,) = report.records["MPI-IO"].to_df()["counters"].to_dict("records")
    assert mpiio["rank"] == -1  # (every rank opened the file: one shared record)
    assert (mpiio["MPIIO_INDEP_WRITES"], mpiio["MPIIO_INDEP_READS"], mpiio["MPIIO_COLL_WRITES"]) == (4, 4, 0)
    assert (mpiio["MPIIO_BYTES_WRITTEN"], mpiio["MPIIO_BYTES_READ"]) == (400000, 400000)
    (posix,) = report.records["POSIX"].to_df()["counters"].to_dict("records")
    off_strip = sum(off % 65536 != 0 for _, off, _, _ in calls)
    assert (posix["POSIX_WRITES"] + posix["POSIX_READS"], posix["POSIX_FILE_NOT_ALIGNED"]) == (8, off_strip)
    assert posix["POSIX_FILE_ALIGNMENT"] == 65536
