"""``callid check``: each program under ``programs/`` commits exactly one error of MARMOT's catalogue
(its file name starts with the check's code, ``NP = n`` says how many ranks it needs); run under
``callid run`` and merged, it gets exactly that finding and no other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.checks import all_checks, reference_markdown
from tests.check import checked
from tests.conftest import ROOT, callid_cmd

PROGRAMS = sorted((Path(__file__).parent / "programs").glob("*.py"))


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("program", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_each_program_gets_exactly_its_finding(program, tmp_path):
    code = program.name.split("_", 1)[0]
    result = checked(tmp_path / "out", program)
    assert {f["code"] for f in result["findings"]} == {code}, json.dumps(result["findings"], indent=1)
    severity = next(c.severity for c in all_checks() if c.code == code)
    assert result["returncode"] == (1 if severity == "error" else 0)


def test_every_check_has_a_program_and_the_doc_is_current():
    codes = {c.code for c in all_checks()}
    assert codes <= {p.name.split("_", 1)[0] for p in PROGRAMS}, "a check without a test program"
    assert (ROOT / "docs" / "checks.md").read_text() == reference_markdown(), \
        "docs/checks.md is stale: python -m pipeline.checks > docs/checks.md"


@pytest.mark.mpi
def test_clean_programs_have_no_error_findings(demo, collective_fanin):
    for run in (demo, collective_fanin):
        res = callid_cmd("check", run.out / "m.duckdb", "--json")
        assert res.returncode == 0, res.stdout
        assert json.loads(res.stdout)["counts"]["error"] == 0
