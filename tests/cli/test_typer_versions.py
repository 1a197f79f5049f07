"""The command line on the lowest typer and rich that ``pyproject.toml`` allows.

The suite runs on the newest the bounds allow (what a fresh install gets); this runs the command
line's own tests and renders the CLI reference on the lowest, so both ends of the bounds are tested.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.metadata import requires

import pytest

from tests.conftest import ROOT, layered_venv

pytestmark = [pytest.mark.slow, pytest.mark.network]  # pip fetches the old versions


def lowest(dist: str) -> str:
    """The lower bound of the base dependency ``dist`` (``typer>=0.12,<0.30``: 0.12)."""
    for req in requires("callid") or []:
        if re.match(rf"{dist}\b", req) and "extra ==" not in req:
            return re.search(r">=\s*([\w.]+)", req)[1]
    raise AssertionError(f"{dist}: not a base dependency with a lower bound")


def test_the_command_line_on_the_lowest_typer_and_rich(tmp_path):
    old = tmp_path / "old"
    pins = [f"typer=={lowest('typer')}", f"rich=={lowest('rich')}"]
    got = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", old, *pins],
                         capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stderr[-2000:]
    env_dir = tmp_path / "venv"
    python, _ = layered_venv(env_dir, old, ROOT)  # the old versions first, then the checkout, then the rest
    (env_dir / "bin" / "callid").write_text(f"#!{python}\nfrom callid.cli import main\nmain()\n")
    (env_dir / "bin" / "callid").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    versions = subprocess.run([python, "-c", "import typer, rich, importlib.metadata as m; "
                               "print(typer.__version__, m.version('rich'))"],
                              capture_output=True, text=True, env=env, cwd=tmp_path)

    def release(v: str) -> str:  # (0.12.0 is 0.12)
        return re.sub(r"(\.0)+$", "", v)

    wanted = [release(p.split("==")[1]) for p in pins]
    assert [release(v) for v in versions.stdout.split()] == wanted, versions

    tests = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/cli/test_cli.py"],
                           capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert tests.returncode == 0, tests.stdout[-3000:]
    reference = subprocess.run([python, "-c", "import sys; sys.path.insert(0, 'docs/hooks'); "
                                "from cli_reference import render; print(render())"],
                               capture_output=True, text=True, env=env, cwd=ROOT)
    assert reference.returncode == 0, reference.stderr[-2000:]
    for name in ("fs init", "servers start", "servers stop", "servers status"):
        assert f"## `callid {name}`" in reference.stdout and f"Usage: callid {name} " in reference.stdout
