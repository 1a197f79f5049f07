"""Every analysis command's output, byte for byte, from this checkout and from an earlier commit.

``python -m tests.same_outputs [REV [NEW]]`` (default ``HEAD`` and the working tree): makes the
tutorial's runs once (a traced run, a collective-buffering run and a replay, ``docs/tutorial.md``),
then with each checkout merges them and runs every command that reads a merged output (``stats``,
``check``, ``insights``, ``report``, ``view``, ``export`` in each format, ``sql`` with every shipped
query and every table), and compares what each printed and wrote.  Prints the commands whose outputs
differ; exit status 1 if any does.  A refactoring that must not change what users see is checked with
it (``REV`` a commit before the refactoring).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
#: the tutorial's runs: output directory -> the command that makes its client and server logs
RUNS = {
    "callid-out": ["run", "-n", "2", "--servers", "2", "examples/mpi_io_test.py", "-b", "96KiB", "-i", "4"],
    "cb": ["run", "-n", "4", "-d", "cb", "examples/collective_write.py", "--block", "16KiB", "--blocks", "4",
           "--cb-nodes", "1"],
    "aligned": ["replay", "callid-out/client.parquet", "-d", "aligned", "--strip-size", "96KiB"],
}
#: the merged tables and views (the earlier commit's set: a table it lacks is not compared)
TABLES = ["calls", "waits", "mpi_calls", "rpcs", "phases", "server_ops", "arrows", "fanout", "clocks", "run",
          "source_io"]
#: what varies from one run of the same command to the next: the time it took and when its progress
#: lines came (masked), and the OTF2 anchor file, which holds a random trace id (not compared; the
#: archive's definitions and events are)
VARIES = re.compile(rb'"seconds": [0-9.]+|\(at [0-9.]+ s\)')
UNCOMPARED = {"traces.otf2"}
#: the shipped queries (this checkout's: a query the earlier commit lacks prints the same refusal twice)
QUERIES = sorted(p.stem for p in (ROOT / "pipeline" / "queries").glob("*.sql"))


def commands(out: str) -> list[tuple[str, list[str]]]:
    """``(name, arguments)`` of every command compared; files they write go under ``out``."""
    a, b, c = (f"{d}/merged.duckdb" for d in RUNS)
    cmds: list[tuple[str, list[str]]] = []
    for d in RUNS:
        cmds.append((f"merge-{d}", ["merge", f"{d}/client.parquet", f"{d}/server.parquet",
                                    "-o", f"{d}/merged.duckdb"]))
    for d, db in zip(RUNS, (a, b, c)):
        cmds += [(f"stats-{d}", ["stats", db]), (f"stats-json-{d}", ["stats", db, "--json"]),
                 (f"check-{d}", ["check", db]), (f"check-json-{d}", ["check", db, "--json"]),
                 (f"insights-{d}", ["insights", db]), (f"insights-json-{d}", ["insights", db, "--json"]),
                 (f"report-{d}", ["report", db, "-o", f"{out}/report-{d}.html", "--json"]),
                 (f"view-{d}", ["view", db, "-o", f"{out}/view-{d}.html", "--json"]),
                 (f"view-part-{d}", ["view", db, "--ranks", "0", "--detail", "5", "-o",
                                     f"{out}/view-part-{d}.html"]),
                 (f"chrome-{d}", ["export", db, "--format", "chrome", "-o", f"{out}/{d}.json"]),
                 (f"perfetto-{d}", ["export", db, "--format", "perfetto", "-o", f"{out}/{d}.pftrace"]),
                 (f"otf2-{d}", ["export", db, "--format", "otf2", "-o", f"{out}/otf2-{d}"])]
        cmds += [(f"sql-{q}-{d}", ["sql", db, "--query", q, "--format", "csv"]) for q in QUERIES]
        cmds += [(f"table-{t}-{d}", ["sql", db, f"SELECT * FROM {t} ORDER BY ALL", "--format", "csv"])
                 for t in TABLES]
    cmds += [("stats-two", ["stats", a, c]), ("insights-two", ["insights", b, c]),
             ("report-two", ["report", a, b, "-o", f"{out}/report-two.html"]),
             ("check-list", ["check", "--list"]), ("insights-list", ["insights", "--list"]),
             ("sql-list", ["sql", "--list-queries"]), ("sql-tables", ["sql", a])]
    return cmds


def callid(checkout: Path, args: list[str], cwd: Path) -> str:
    """Run ``callid ARGS`` of ``checkout`` in ``cwd``: its exit status, standard output and error."""
    code = f"import sys; sys.path.insert(0, {str(checkout)!r}); sys.argv[0] = 'callid'; " \
           "from callid.cli import main; main()"
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)
    return f"exit {done.returncode}\n--- stdout\n{done.stdout}--- stderr\n{done.stderr}"


def outputs(checkout: Path, work: Path, name: str) -> dict[str, bytes]:
    """Every command's printout and every file it wrote, by name, run with ``checkout``."""
    out = work / name
    out.mkdir()
    for d in RUNS:  # (each checkout merges the same logs into its own output)
        (out / d).mkdir()
        for log in ("client.parquet", "server.parquet"):
            (out / d / log).symlink_to(work / d / log)
    found = {}
    for label, args in commands(str(out)):
        found[label] = callid(checkout, args, out).replace(str(out), "OUT").encode()
    for f in sorted(out.rglob("*")):
        if f.is_file() and not f.is_symlink() and f.suffix not in (".duckdb", ".parquet") \
                and f.name not in UNCOMPARED:
            found[str(f.relative_to(out))] = f.read_bytes().replace(str(out).encode(), b"OUT")
    return {k: VARIES.sub(b"...", v) for k, v in found.items()}


def _worktree(rev: str, where: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(where), rev], check=True)
    return where


def main(argv: list[str]) -> int:
    rev, rev2 = (argv + ["HEAD"])[0], (argv[1:] or [None])[0]
    with tempfile.TemporaryDirectory(prefix="same-outputs-") as tmp:
        work = Path(tmp)
        (work / "examples").symlink_to(ROOT / "examples")
        for args in RUNS.values():
            done = subprocess.run([str(BIN / "callid"), *args], cwd=work, capture_output=True, text=True)
            if done.returncode:
                print(f"{' '.join(args)}: exit {done.returncode}\n{done.stderr}", file=sys.stderr)
                return 2
        trees = [_worktree(rev, work / "before")] + ([_worktree(rev2, work / "after")] if rev2 else [])
        try:
            old, new = outputs(trees[0], work, "old"), outputs(trees[-1] if rev2 else ROOT, work, "new")
        finally:
            for tree in trees:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", tree], check=True)
        differ = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
        for k in differ:
            print(f"differs: {k}")
        print(f"{len(old.keys() | new.keys()) - len(differ)} outputs the same, {len(differ)} differ "
              f"({rev} against {rev2 or 'the working tree'})")
        return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
