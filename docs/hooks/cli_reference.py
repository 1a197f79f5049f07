"""MkDocs hook: the CLI reference page (``cli.md``), rendered from the typer app at build time.

Each command's page section is exactly what ``callid COMMAND --help`` prints, so the
reference cannot drift from the command line.
"""

from __future__ import annotations

import typer.main
from mkdocs.structure.files import File, Files

from callid.cli import app, commands

PAGE = "cli.md"
WIDTH = 100  # help text wrapped as on a 100-column terminal


def _help(command, name: str, parent=None) -> str:
    """``callid [NAME] --help`` of a click command, as the terminal shows it."""
    ctx = command.context_class(command, info_name=name, parent=parent, max_content_width=WIDTH,
                                terminal_width=WIDTH)
    return command.get_help(ctx)


def render() -> str:
    """The CLI reference as Markdown: the top-level help, then every command's."""
    root = typer.main.get_command(app)
    root_ctx = root.context_class(root, info_name="callid", max_content_width=WIDTH, terminal_width=WIDTH)
    parts = [
        "# Command reference\n",
        "Generated from the command line itself (`callid.cli`) when the site is built: each section is "
        "what `callid COMMAND --help` prints.\n",
        "```text\n" + _help(root, "callid") + "\n```\n",
    ]
    for name, command in commands().items():
        parts.append(f"## `callid {name}`\n")
        ctx = root_ctx
        for group in name.split()[:-1]:  # (a group's command: its usage line names the group)
            ctx = root.commands[group].context_class(root.commands[group], info_name=group, parent=ctx)
        parts.append("```text\n" + _help(command, name.split()[-1], ctx) + "\n```\n")
    return "\n".join(parts)


def on_files(files: Files, config) -> Files:
    """Add the generated page to the site."""
    files.append(File.generated(config, PAGE, content=render()))
    return files
