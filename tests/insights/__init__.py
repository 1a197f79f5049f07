"""Tests of ``callid insights``; :func:`insights_of` runs a workload as a user would."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import callid_cmd, cli

PROGRAMS = Path(__file__).parent / "programs"


def insights_of(out: Path, program: str, *args: str, np: int = 4, run: tuple[str, ...] = ()) -> list[dict]:
    """``callid run -n np RUN... programs/PROGRAM ARGS...`` (``run``: options of callid run, e.g.
    ``("--servers", "4")``), merge, ``callid insights --json``: its findings."""
    res = callid_cmd("run", "-n", np, "-d", out, "--timeout", "60", *run, PROGRAMS / program, *args,
                     timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    res = cli("merge", out / "client.parquet", out / "server.parquet", "-o", out / "m.duckdb")
    assert res.returncode == 0, res.stderr
    res = cli("insights", out / "m.duckdb", "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["findings"]


def of_code(findings: list[dict], code: str) -> list[dict]:
    """The findings of one insight."""
    return [f for f in findings if f["code"] == code]
