"""The console sessions of the documentation: parse them, run them, compare their outputs.

A session is a fenced block marked ``console``: lines starting with ``$ `` are commands, the
lines under a command are what it printed (standard output and error, as a terminal shows
them).  The lines of a page's sessions run in order in one directory, as a reader would type
them from the root of a checkout.

Outputs are compared line by line after :func:`normalise`: numbers with a decimal point (times,
rates, ratios) and run ids vary from run to run and are not compared, nor are whitespace
and the widths of table rules.  A documented line ``...`` stands for lines left out, and
``...`` inside a line for any text; every other documented line must be printed by the
command (in any order: rows sorted by a time may come in another order).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

FENCE = re.compile(r"^```console\n(.*?)^```", re.S | re.M)
ELLIPSIS = "..."
_FLOAT = re.compile(r"\d+\.\d+")
_RUN_ID = re.compile(r"\b[0-9a-f]{12}\b")
_RULE = re.compile(r"-{3,}")


@dataclass
class Command:
    """One ``$ command`` of a session and the output the documentation shows for it."""

    line: str
    expected: list[str] = field(default_factory=list)
    where: str = ""  # page and line number, for messages


def commands(page: Path) -> list[Command]:
    """The commands of every console session of ``page``, in order."""
    text = page.read_text()
    found: list[Command] = []
    for block in FENCE.finditer(text):
        first_line = text[:block.start(1)].count("\n") + 1
        current: Command | None = None
        for i, line in enumerate(block.group(1).splitlines()):
            if line.startswith("$ "):
                current = Command(line[2:].strip(), where=f"{page.name}:{first_line + i}")
                found.append(current)
            elif current is not None:
                current.expected.append(line)
    return found


def normalise(line: str) -> str:
    """``line`` without what varies from run to run (see the module's docstring)."""
    line = _FLOAT.sub("N", line)
    line = _RUN_ID.sub("H", line)
    line = _RULE.sub("---", line)
    return " ".join(line.split())


def _pattern(expected: str) -> re.Pattern:
    parts = [re.escape(normalise(p)) for p in expected.split(ELLIPSIS)]
    return re.compile(r"\s*.*?\s*".join(parts))


def missing(expected: list[str], printed: str) -> list[str]:
    """The documented lines that ``printed`` does not contain."""
    lines = [normalise(line) for line in printed.splitlines()]
    absent = []
    for want in expected:
        if not want.strip() or want.strip() == ELLIPSIS:
            continue
        pattern = _pattern(want.strip())
        if not any(pattern.fullmatch(line) for line in lines):
            absent.append(want)
    return absent


def run(command: Command, cwd: Path, bin_dir: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``command`` with bash in ``cwd`` as a reader would (``bin_dir`` first on PATH), its
    standard error merged into its standard output."""
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", COLUMNS="100")
    for name in ("PYTHONPATH", "PYTHONUNBUFFERED"):  # (unbuffered, a rank's line and its newline part)
        env.pop(name, None)
    return subprocess.run(["bash", "-c", command.line], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
