"""``callid check``: each program under ``programs/`` commits exactly one error of MARMOT's catalogue
(its file name starts with the check's code, ``NP = n`` says how many ranks it needs); run under
``callid run`` and merged, it gets exactly that finding and no other."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from callid_core.evidence import TRACED, source_of_origins
from pipeline.checks import CHECKS, reference_markdown
from tests.check import checked
from tests.conftest import ROOT, cli

PROGRAMS = sorted((Path(__file__).parent / "programs").glob("*.py"))


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("program", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_each_program_gets_exactly_its_finding(program, tmp_path):
    code = program.name.split("_", 1)[0]
    result = checked(tmp_path / "out", program)
    assert {f["code"] for f in result["findings"]} == {code}, json.dumps(result["findings"], indent=1)
    assert result["undecidable"] == []  # a traced run records what every check needs
    severity = next(c.severity for c in CHECKS.rules() if c.code == code)
    assert result["returncode"] == (1 if severity == "error" else 0)


def test_every_check_has_a_program_and_the_doc_is_current():
    codes = {c.code for c in CHECKS.rules()}
    assert codes <= {p.name.split("_", 1)[0] for p in PROGRAMS}, "a check without a test program"
    assert (ROOT / "docs" / "checks.md").read_text() == reference_markdown(), \
        "docs/checks.md is stale: python -m pipeline.checks > docs/checks.md"


@pytest.mark.mpi
def test_clean_programs_have_no_error_findings(demo, collective_fanin):
    for run in (demo, collective_fanin):
        res = cli("check", run.out / "m.duckdb", "--json")
        assert res.returncode == 0, res.stdout
        assert json.loads(res.stdout)["counts"]["error"] == 0
        assert json.loads(res.stdout)["undecidable"] == []


def test_what_a_source_records_is_what_all_its_calls_origins_record():
    assert source_of_origins([None]) == source_of_origins([None, "posix"]) == source_of_origins([]) == TRACED
    darshan = source_of_origins(["replay", "DXT_POSIX", "DXT_MPIIO"])
    assert darshan.recorded() == ["accesses"]
    assert darshan.label == ("a replay of a Darshan log's DXT_MPIIO segments and a Darshan log's DXT_POSIX "
                             "segments")
    assert source_of_origins(["replay", "callid"]).recorded() == ["accesses", "functions"]
    assert source_of_origins(["callid", "DXT_POSIX"]).recorded() == ["accesses"]  # what both record
    assert source_of_origins(["replay"]).recorded() == []  # the replay's own calls are evidence of nothing
    assert source_of_origins(["a new kind"]).recorded() == ["accesses"]
    assert all(not TRACED.missing(c.needs) for c in CHECKS.rules())
    needs = ("opens", "accesses", "closes")
    assert TRACED.missing(needs) == [] and darshan.missing(needs) == ["opens", "closes"]


def test_races_of_many_ranks_are_one_finding_per_file_counted_exactly(tmp_path):
    """D502 on a synthetic run where every rank reads and writes the same file with nothing between the
    accesses: one finding for the file, with the pairs of ranks that race counted by brute force here,
    and every rank named (not one finding per pair: 1000 ranks make 499,500)."""
    made = cli("synth", "--ranks", "12", "--calls", "300", "--seed", "5", "-d", tmp_path)
    assert made.returncode == 0, made.stderr
    db = tmp_path / "m.duckdb"
    assert cli("merge", tmp_path / "client.parquet", tmp_path / "server.parquet", "-o", db).returncode == 0
    with duckdb.connect(str(db), read_only=True) as con:
        accesses = con.execute("SELECT rank, file, file_offset, file_offset + size, func LIKE '%write%' "
                               "FROM calls WHERE size > 0").fetchall()
    racing = {(min(a[0], b[0]), max(a[0], b[0])) for a in accesses for b in accesses
              if a[0] != b[0] and a[1] == b[1] and (a[4] or b[4]) and a[2] < b[3] and b[2] < a[3]}
    result = json.loads(cli("check", db, "--code", "D502", "--json").stdout)
    (race,) = result["findings"]
    assert race["detail"].startswith(f"{len(racing)} pairs of ranks race on this file (12 ranks); the first")
    assert race["ranks"] == sorted({r for pair in racing for r in pair}) and len(race["callids"]) == 2


@pytest.mark.mpi
@pytest.mark.slow
def test_groups_all_freed_get_no_finding(tmp_path):
    result = checked(tmp_path / "out", Path(__file__).parent / "programs" / "F104_group_not_freed.py",
                     "--free-all", must_run=True)
    assert result["findings"] == [] and result["returncode"] == 0
