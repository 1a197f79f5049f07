"""The documentation site builds with the documented command, strictly and offline, and its
references are complete: every command of the command line, every table and column."""

from __future__ import annotations

import re
import subprocess

from callid.cli import commands
from callid_core.tables import MERGED
from tests.conftest import BIN, ROOT

BUILD = "pip install -e '.[docs]' && mkdocs build --strict"


def _sh_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)\n```", text, re.S)


def test_the_build_command_is_documented_and_its_extra_exists():
    readme = (ROOT / "README.md").read_text().split("## Documentation", 1)[1].split("\n## ", 1)[0]
    assert _sh_blocks(readme) == [BUILD]
    assert BUILD in _sh_blocks((ROOT / "docs" / "index.md").read_text())
    extras = dict(re.findall(r"^(\w+) = \[(.*)\]", (ROOT / "pyproject.toml").read_text().split(
        "[project.optional-dependencies]", 1)[1].split("\n[", 1)[0], re.M))
    assert '"mkdocs>=' in extras["docs"]
    assert '"callid[docs]"' in extras["test"]  # the README's test environment builds the docs


def test_site_builds_strict_offline_with_complete_references(tmp_path):
    mkdocs = BIN / "mkdocs"
    assert mkdocs.exists(), "mkdocs is part of the test extra: pip install -e '.[test]'"
    site = tmp_path / "site"
    result = subprocess.run([mkdocs, "build", "--strict", "-d", site], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "WARNING" not in result.stderr, result.stderr

    pages = {p.relative_to(site).as_posix(): p.read_text() for p in site.rglob("*.html")}
    for page in ("index.html", "tutorial/index.html", "concepts/index.html", "tools/index.html",
                 "tables/index.html", "cli/index.html", "insights/index.html", "checks/index.html"):
        assert page in pages
    for name, text in pages.items():  # nothing fetched from the network when a page is opened
        assert not re.search(r"<(script|link)[^>]+(src|href)=\"(https?:)?//", text), name

    cli = pages["cli/index.html"]
    every = commands()
    assert len(every) >= 10 and {"fs init", "servers start", "servers stop", "servers status"} <= set(every)
    for name, command in every.items():
        assert f"Usage: callid {name} " in cli, name
        for param in command.params:
            for opt in param.opts:
                if opt.startswith("--"):
                    assert opt in cli, f"callid {name} {opt}"

    tables = pages["tables/index.html"]
    for table in MERGED.values():
        assert f"<code>{table.name}</code>" in tables
        for column in table.columns:
            assert f"<code>{column.name}</code>" in tables, f"{table.name}.{column.name}"
