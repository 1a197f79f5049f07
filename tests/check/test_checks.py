"""``callid check``: each program under ``programs/`` commits exactly one error of MARMOT's catalogue
(its file name starts with the check's code, ``NP = n`` says how many ranks it needs); run under
``callid run`` and merged, it gets exactly that finding and no other."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipeline.checks import all_checks, reference_markdown
from tests.conftest import ROOT, callid_cmd

PROGRAMS = sorted((Path(__file__).parent / "programs").glob("*.py"))


def findings(out: Path, program: Path, np: int) -> dict:
    """``callid run`` (the program may fail: what it logged is kept), merge, ``check --json``."""
    callid_cmd("run", "-n", np, "-d", out, "--timeout", "60", program, timeout=120)
    assert (out / "client.parquet").exists(), f"{program.name} logged nothing"
    res = callid_cmd("merge", out / "client.parquet", out / "server.parquet", "-o", out / "m.duckdb")
    assert res.returncode == 0, res.stderr
    res = callid_cmd("check", out / "m.duckdb", "--json")
    assert res.returncode in (0, 1), res.stderr
    return json.loads(res.stdout) | {"returncode": res.returncode}


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("program", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_each_program_gets_exactly_its_finding(program, tmp_path):
    code = program.name.split("_", 1)[0]
    np = int(re.search(r"^NP = (\d+)", program.read_text(), re.M).group(1))
    result = findings(tmp_path / "out", program, np)
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
