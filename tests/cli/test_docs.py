"""The README's set-up commands, usage errors, lint and packaging are part of the product (the CLI's
help: test_cli; the documentation site: tests/docs)."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import BIN, ROOT, callid_cmd, layered_venv


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set up and run", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)\n```", setup, re.S)
    assert len(blocks) == 2 and all("\n" not in b for b in blocks)
    main, tests = blocks
    assert main.endswith("callid demo")
    assert tests.endswith("pytest -q -n 2")
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install -e '.[test]'" in tests and "pip install -e '.[test]'" in ci
    assert "\npytest -q -n 2\n" in ci


def test_bad_option_is_one_error_line_and_exit_2(tmp_path):
    result = callid_cmd("run", "--flow-buffer", "lots", "x.py")
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert errors == ["Error: Invalid value for '--flow-buffer': 'lots' is not a size "
                      "(examples: 65536, 64KiB, 1MiB)"]
    assert "Traceback" not in result.stderr


def test_ruff_clean():
    ruff = BIN / "ruff" if (BIN / "ruff").exists() else shutil.which("ruff")
    assert ruff, "ruff is part of the test extra: pip install -e '.[test]'"
    result = subprocess.run([ruff, "check", str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def _packages() -> list[Path]:
    """The top-level packages the distribution ships (pyproject's packages.find include patterns)."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    found = re.search(r"\[tool\.setuptools\.packages\.find\]\ninclude = \[(.*?)\]", pyproject)
    assert found, "pyproject.toml: [tool.setuptools.packages.find] include = [...]"
    patterns = re.findall(r'"([^"]+)"', found.group(1))
    return [d for d in sorted(ROOT.iterdir()) if (d / "__init__.py").exists()
            and any(fnmatch.fnmatch(d.name, p) for p in patterns)]


def _data_files(top: Path) -> set[str]:
    """Files of the packages under ``top`` that are not Python code, relative to ``top``."""
    return {p.relative_to(top).as_posix() for pkg in _packages() for p in (top / pkg.name).rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts}


@pytest.mark.slow
@pytest.mark.network  # pip fetches the build backend (setuptools) for its isolated build
def test_a_non_editable_install_ships_every_query_and_asset(tmp_path):
    """``pip install .`` (not editable) into a fresh environment: the queries, checks, insights and
    page templates are in the installed package, and the commands that read them work there."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for pkg in _packages():
        shutil.copytree(pkg, src / pkg.name, ignore=shutil.ignore_patterns("__pycache__"))
    env_dir = tmp_path / "venv"
    # the dependencies (and pip) come from this environment; callid itself only from the install
    python, site = layered_venv(env_dir)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    install = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", src], capture_output=True,
                             text=True, env=env, cwd=tmp_path, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]
    where = subprocess.run([python, "-c", "import callid, pipeline; print(pipeline.__file__)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path)
    assert where.stdout.startswith(str(site)), where.stdout + where.stderr
    assert _data_files(site) >= _data_files(ROOT)

    def callid(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([env_dir / "bin" / "callid", *args], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=300)

    assert callid("synth", "--calls", "200", "-d", "s").returncode == 0
    assert callid("merge", "s/client.parquet", "s/server.parquet", "-o", "s/m.duckdb").returncode == 0
    listed = callid("sql", "s/m.duckdb", "--list-queries")
    assert listed.returncode == 0, listed.stderr
    for query in (ROOT / "pipeline" / "queries").glob("*.sql"):
        assert query.stem in listed.stdout
    top = callid("sql", "s/m.duckdb", "--query", "top_fanout")
    assert top.returncode == 0 and top.stdout.startswith("callid_hex"), top.stderr
    insights = callid("insights", "s/m.duckdb")
    assert insights.returncode == 0 and insights.stdout.startswith("callid insights: "), insights.stderr
    check = callid("check", "s/m.duckdb")
    assert check.returncode in (0, 1) and check.stdout.startswith("callid check: "), check.stderr
    report = callid("report", "s/m.duckdb", "-o", "report.html")
    assert report.returncode == 0, report.stderr
