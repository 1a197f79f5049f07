"""Every command shown in the documentation runs, and prints what the documentation says it prints;
every command of the README's usage sections runs.

Each page's console sessions run in order in a fresh directory that has the checkout's
``examples/`` and ``bench/`` (the commands are written for the root of a checkout); see
:mod:`tests.docs.console` for how outputs are compared.
"""

from __future__ import annotations

import re

import pytest

from tests.conftest import BIN, ROOT
from tests.docs import console

DOCS = ROOT / "docs"
#: the pages with console sessions (a page that gains one must be listed: test_every_session_is_run)
PAGES = ["index.md", "tutorial.md", "guide.md", "concepts.md", "tools.md", "c-programs.md", "architecture.md"]
#: the README's sections whose ```sh blocks are run in order (set-up: CI runs it; the docs' build: test_build)
README_SECTIONS = ["A five-minute tour", "The other commands"]
#: the Darshan log the README's replay commands take (app.darshan): a small DXT log made by the checkout
DARSHAN_LOG = ("python -m bench.darshan_log app.darshan --ranks 8 --accesses 4 --size 256KiB "
               "--ranks-per-node 4")


def test_every_session_is_run():
    with_sessions = sorted(p.name for p in DOCS.glob("*.md") if console.commands(p))
    assert with_sessions == sorted(PAGES)


def test_the_comparison_ignores_only_what_varies():
    printed = "callid statistics (run 5f8679d091c6, CallID layout 64/23)\nio0   17  786432   1.56\n"
    assert console.missing(["callid statistics (run 0d5353096762, CallID layout 64/23)",
                            "io0      17  786432     0.998", "..."], printed) == []
    assert console.missing(["io0 18 786432 1.56"], printed) == ["io0 18 786432 1.56"]
    assert console.missing(["callid statistics (run ..., CallID layout 32/8)"], printed) != []
    assert console.missing(["callid statistics ... 64/23)"], printed) == []


def _checkout_like(tmp_path):
    """``tmp_path`` with the checkout's examples and benchmarks, where the documented commands run."""
    for name in ("examples", "bench"):
        (tmp_path / name).symlink_to(ROOT / name)


@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.parametrize("page", PAGES)
def test_documented_commands_print_what_the_page_shows(page, tmp_path):
    _checkout_like(tmp_path)
    failures = []
    for command in console.commands(DOCS / page):
        result = console.run(command, tmp_path, BIN)
        if result.returncode != 0:
            failures.append(f"{command.where}: `{command.line}` exited {result.returncode}:\n"
                            f"{result.stdout[-3000:]}")
            break  # the next commands need this one's output
        absent = console.missing(command.expected, result.stdout)
        if absent:
            failures.append(f"{command.where}: `{command.line}` did not print:\n  " + "\n  ".join(absent)
                            + f"\nit printed:\n{result.stdout[-5000:]}")
    assert not failures, "\n\n".join(failures)


def readme_commands() -> list[console.Command]:
    """The commands of the README's usage sections, in order (a trailing ``# comment`` dropped)."""
    readme = (ROOT / "README.md").read_text()
    found = []
    for section in README_SECTIONS:
        text = readme.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
        for block in re.findall(r"```sh\n(.*?)\n```", text, re.S):
            found += [console.Command(re.sub(r"\s+#.*$", "", line), where=f"README.md ({section})")
                      for line in block.splitlines() if line.strip()]
    return found


@pytest.mark.slow
@pytest.mark.mpi
def test_readme_commands_run(tmp_path):
    _checkout_like(tmp_path)
    assert console.run(console.Command(DARSHAN_LOG), tmp_path, BIN).returncode == 0
    commands = readme_commands()
    assert len(commands) >= 15
    failures = []
    for command in commands:
        result = console.run(command, tmp_path, BIN)
        if result.returncode != 0 or "Traceback" in result.stdout:
            failures.append(f"{command.where}: `{command.line}` exited {result.returncode}:\n"
                            f"{result.stdout[-2000:]}")
    assert not failures, "\n\n".join(failures)
