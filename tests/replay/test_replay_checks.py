"""``callid check`` on replays: a check needing what the source does not record (a Darshan log: the data
accesses only) is listed as not decidable from this source, never a finding, and not in the exit status;
``callid stats`` and ``callid report`` say the same."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pipeline.checks import CHECKS
from pipeline.merged import open_merged
from pipeline.report import compute_report
from tests.conftest import ROOT, callid_cmd, cli

pytestmark = pytest.mark.mpi

CODES = [c.code for c in CHECKS.rules()]


def raced_log(path: Path, ranks: int = 4, files: int = 3, size: int = 65536) -> Path:
    """An IOR-like Darshan log (``ior -C``: every rank writes its blocks of each shared file, then reads
    its neighbour's): the job separated writes and reads by a barrier DXT does not record."""
    from bench.darshan_log import Segments, synthetic_trace, write_log

    trace = vars(synthetic_trace(ranks=ranks, files=files, accesses=2, size=size, collective=False))
    seg = trace["dxt_mpiio"]
    shift = np.where(seg.is_read, ((seg.rank + 1) % ranks - seg.rank) * size, 0)
    columns = {k: getattr(seg, k) for k in Segments._TYPES}
    trace["dxt_mpiio"] = Segments(**columns | {"offset": seg.offset + shift})
    write_log(path, **trace)
    return path


def merged(source: Path, out: Path, *args: str) -> Path:
    res = callid_cmd("replay", source, "-d", out, *args)
    assert res.returncode == 0, res.stderr
    res = cli("merge", out / "client.parquet", out / "server.parquet", "-o", out / "m.duckdb")
    assert res.returncode == 0, res.stderr
    return out / "m.duckdb"


def raw_findings(db: Path, code: str) -> list[tuple]:
    """What check ``code``'s query alone returns on ``db`` (as if it were decidable)."""
    check = next(c for c in CHECKS.rules() if c.code == code)
    con = open_merged(str(db)).con
    try:
        con.execute((ROOT / "pipeline" / "check_sql" / "_views.sql").read_text())
        return con.execute(check.sql).fetchall()
    finally:
        con.close()


@pytest.mark.slow
def test_a_darshan_replay_has_no_finding_its_log_cannot_support(tmp_path):
    log = raced_log(tmp_path / "ior.darshan")
    # (a hint for the replay's file system: not one the job passed, so H301 must not judge it)
    db = merged(log, tmp_path / "r", "--hint", "romio_cb_write=enable")
    # the queries alone would accuse the job: files left open (one finding per file), races (the
    # barrier between the writes and the reads is not in the log), an unreserved hint key
    left_open = raw_findings(db, "F102")
    files = [f"/pvfs2/scratch/callid/file{i}" for i in range(3)]
    assert sorted((f[3], f[0]) for f in left_open) == [(f, [0]) for f in files]
    assert raw_findings(db, "D502") and raw_findings(db, "H301")

    res = cli("check", db, "--json")
    assert res.returncode == 0, res.stdout
    out = json.loads(res.stdout)
    assert out["findings"] == [] and out["counts"] == {"error": 0, "warning": 0}
    label = "a replay of a Darshan log's DXT_MPIIO segments"
    assert out["source"] == {"label": label, "records": ["accesses"]}
    undecidable = {u["code"]: u for u in out["undecidable"]}
    assert list(undecidable) == CODES  # DXT records the accesses only: no check can be decided
    assert undecidable["F102"]["missing"] == ["opens", "closes", "completions"]
    assert {"syncs", "barriers", "closes"} <= set(undecidable["D502"]["missing"])
    assert undecidable["H301"]["reason"] == f"not recorded in {label}: hints"

    text = cli("check", db)
    assert text.returncode == 0, text.stdout
    assert text.stdout.startswith(f"callid check: no findings (0 checks; {len(CODES)} not decidable from "
                                  "this source)")
    assert "  F102 a file still open when the rank ended (needs opens, closes, completions)" in text.stdout
    assert "\n  D502 " in text.stdout
    one = cli("check", db, "--code", "F102", "--json")
    assert one.returncode == 0 and [u["code"] for u in json.loads(one.stdout)["undecidable"]] == ["F102"]

    stats = json.loads(cli("stats", db, "--json").stdout)
    assert stats["findings"] == {"error": 0, "warning": 0} and stats["checks_undecidable"] == CODES
    assert f"{len(CODES)} checks not decidable from this source" in cli("stats", db).stdout
    report = compute_report(open_merged(db))
    assert report["checks"] == [] and report["overview"]["check_errors"] == 0
    assert report["overview"]["checks_undecidable"] == len(CODES)
    assert [u["code"] for u in report["checks_undecidable"]] == CODES


@pytest.mark.slow
def test_a_replay_of_a_traced_run_decides_no_more_than_its_client_log_records(collective_fanin, tmp_path):
    traced = json.loads(cli("check", collective_fanin.db, "--json").stdout)
    assert traced["undecidable"] == [] and traced["source"]["label"] == "a traced run"
    db = merged(collective_fanin.out / "client.parquet", tmp_path / "again")
    res = cli("check", db, "--json")
    assert res.returncode == 0, res.stdout
    out = json.loads(res.stdout)
    # (the replay makes no closes, syncs, views, ... of its own)
    assert out["source"]["records"] == ["accesses", "functions"]
    assert out["findings"] == [] and [u["code"] for u in out["undecidable"]] == CODES
