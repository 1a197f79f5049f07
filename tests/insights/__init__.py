"""Tests of ``callid insights``; :func:`insights_of` runs a workload as a user would."""

from __future__ import annotations

import json
import re
from pathlib import Path

from callid.run import RunOptions, check_options
from callid_core.units import parse_size
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


#: the options of callid run an insight may advise, and the number that says the advised value
ADVISED = {"--strip-size": "advised_strip_bytes", "--flow-buffer": "advised_flow_buffer_bytes"}


def advised_options(finding: dict) -> list[str]:
    """The options of ``callid run`` a finding recommends, as its text says them (checked against its
    ``advised_*`` numbers, and taken by callid run: :class:`~callid_core.errors.BadValue` if not)."""
    text = finding.get("recommendation") or ""
    said = dict(re.findall(r"(--strip-size|--flow-buffer) (\d+(?:[KMG]iB)?)", text))
    numbers = finding["numbers"]
    assert {flag: parse_size(v) for flag, v in said.items()} == {
        flag: numbers[key] for flag, key in ADVISED.items() if numbers.get(key) is not None}, finding
    values = {flag.lstrip("-").replace("-", "_"): parse_size(v) for flag, v in said.items()}
    check_options(RunOptions(target=["program.py"], **values))
    return [part for flag, v in said.items() for part in (flag, v)]


def of_code(findings: list[dict], code: str) -> list[dict]:
    """The findings of one insight."""
    return [f for f in findings if f["code"] == code]
