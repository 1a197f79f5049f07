"""Every command and option of the ``callid`` command explains itself, and the README names every command.

The commands and options are taken from the Typer app itself, so a new one cannot slip through.
"""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from callid.cli import app, commands
from tests.conftest import ROOT, callid_cmd, cli

CLICK = commands()
COMMANDS = sorted(CLICK)


def _params(name: str):
    return [p for p in CLICK[name].params if p.name != "help"]


def listed(*group: str) -> list[str]:
    """The commands ``callid [GROUP] --help`` lists, a group's by name and with its own (recursively)."""
    out = CliRunner().invoke(app, [*group, "--help"], prog_name="callid").output
    names = re.findall(r"^  (\S+)  ", out.split("\nCommands:\n")[1], re.M) if "\nCommands:\n" in out else []
    if not names:
        return [" ".join(group)]
    return [found for name in names for found in listed(*group, name)]


def test_the_app_has_the_commands_users_know():
    assert {"run", "merge", "stats", "sql", "view", "export", "synth", "demo"} <= set(COMMANDS)
    assert {"fs init", "servers start", "servers stop", "servers status"} <= set(COMMANDS)


def test_commands_are_every_command_the_help_lists():
    """commands(), which the per-option checks here and the CLI reference are built on, walks every group
    (once it took typer's groups for plain commands and left out fs init and servers start|stop|status)."""
    assert COMMANDS == sorted(listed())


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_and_option_has_help(name):
    command = CLICK[name]
    assert command.help and "Example" in command.help or name == "demo", f"{name}: no help with an example"
    missing = [p.name for p in _params(name) if not getattr(p, "help", None)]
    assert missing == [], f"callid {name}: no help for {missing}"


@pytest.mark.parametrize("name", COMMANDS)
def test_usage_and_metavars_are_readable(name):
    out = cli(*name.split(), "--help").stdout
    assert out.startswith(f"Usage: callid {name} [OPTIONS]")
    for junk in ("<str>", "<list[", "<path>", "<int", "<float", "{"):
        assert junk not in out, f"callid {name} --help shows {junk!r}"


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_is_in_the_readme(name):
    assert re.search(rf"`?callid {name}\b", (ROOT / "README.md").read_text()), f"README: no 'callid {name}'"


def test_output_options_are_consistent():
    """-o/--output names what a command writes, -d/--out-dir a directory, --format a rendering."""
    for name in COMMANDS:
        for p in _params(name):
            if "-o" in p.opts:
                assert p.opts == ["-o", "--output"], (name, p.opts)
            if "--format" in p.opts:
                assert p.name == "fmt" and p.type_descriptor.is_choice, (name, p.opts)
            if p.name == "out_dir":
                assert p.opts == ["-d", "--out-dir"], (name, p.opts)


@pytest.mark.parametrize("name", ["run", "merge", "stats", "synth", "view", "export", "demo"])
def test_commands_with_a_summary_offer_json(name):
    assert any(p.opts == ["--json"] for p in _params(name))


def test_version():
    result = callid_cmd("--version")
    assert result.returncode == 0 and re.fullmatch(r"callid \d+\.\d+\.\d+\S*\n", result.stdout)


def test_errors_are_one_line_with_the_exit_status_of_their_class(tmp_path):
    cases = [
        (("merge", tmp_path / "no.parquet", tmp_path / "no2.parquet"), 2, "no.parquet: no such file"),
        (("merge", "a", "b", "--storage", "sqlite"), 2, "Invalid value for '--storage'"),
        (("stats", tmp_path / "missing.duckdb"), 2, "missing.duckdb: no such file"),
        (("sql", tmp_path / "missing.duckdb"), 2, "missing.duckdb: no such file"),
        (("sql",), 2, "no database: give DB (or --list-queries)"),
        (("sql", tmp_path / "m.duckdb", "SELECT 1", "-q", "top_fanout"), 2, "give one of QUERY, -f FILE"),
        (("synth", "-d", tmp_path / "s", "--skew", "server:9=+1ms"), 2, "--skew: server:9"),
        (("run", "--clock-skew", "bad", "-d", tmp_path / "r", __file__), 2, "--clock-skew: bad clock skew"),
    ]
    for args, code, said in cases:  # (the run case through the console script, the rest in this process)
        result = (callid_cmd if args[0] == "run" else cli)(*args)
        assert result.returncode == code, (args, result.stderr)
        assert said in result.stderr and "Traceback" not in result.stderr, (args, result.stderr)


def test_synth_json_summary(tmp_path):
    result = cli("synth", "-d", tmp_path / "s", "--calls", 40, "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["calls"] == 40 and summary["out_dir"] == str(tmp_path / "s")


def test_view_detail_default_is_the_timelines():
    from pipeline.timeline import DETAIL

    assert next(p.default for p in _params("view") if p.name == "detail") == DETAIL
