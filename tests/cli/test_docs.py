"""The README's set-up commands, usage errors and lint are part of the product (the CLI's help: test_cli)."""

from __future__ import annotations

import re
import shutil
import subprocess

from tests.conftest import BIN, ROOT, callid_cmd


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set up and run", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)\n```", setup, re.S)
    assert len(blocks) == 2 and all("\n" not in b for b in blocks)
    main, tests = blocks
    assert main.endswith("callid demo")
    assert tests.endswith("pytest -q")
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install -e '.[test]'" in tests and "pip install -e '.[test]'" in ci
    assert "\npytest -q\n" in ci


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
