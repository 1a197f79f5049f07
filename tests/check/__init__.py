"""Tests of ``callid check``; :func:`checked` runs a test program as a user would."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import callid_cmd, cli


def checked(out: Path, program: Path, *args: str, must_run: bool = False) -> dict:
    """``callid run`` the program (``NP = n`` in it says how many ranks; ``args`` are its arguments),
    merge, ``callid check --json``: its output, with the check's ``returncode``.  A program that fails
    keeps what it logged (fine unless ``must_run``)."""
    np = int(re.search(r"^NP = (\d+)", program.read_text(), re.M).group(1))
    run = callid_cmd("run", "-n", np, "-d", out, "--timeout", "60", program, *args, timeout=120)
    if must_run:
        assert run.returncode == 0, run.stderr[-3000:]
    assert (out / "client.parquet").exists(), f"{program.name} logged nothing"
    res = cli("merge", out / "client.parquet", out / "server.parquet", "-o", out / "m.duckdb")
    assert res.returncode == 0, res.stderr
    res = cli("check", out / "m.duckdb", "--json")
    assert res.returncode in (0, 1), res.stderr
    return json.loads(res.stdout) | {"returncode": res.returncode}
