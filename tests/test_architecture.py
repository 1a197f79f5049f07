"""The import graph is the architecture: one direction, no cycles (module-level and lazy imports).

    callid.console, callid.cli,     the console script, the command line, the Python API and the runs
    callid.run, callid.replay.job,  they start (may import anything)
    callid.api
    callid.mpiio, .trace, .launch,  the client inside the ranks (and the replayers, and the FUSE client
    callid.replay, callid.romio,    of a run on the MPI library; and the servers' wire client): the bottom
    callid.server_wire              layer, the client's own modules and the parts of server_sim a PVFS2
                                    client links
    server_sim                      the server stack: the bottom layer and itself
    pipeline                        the analysis: the bottom layer and itself; inside it the writer
                                    (pipeline.merge) and the readers of its output (stats, checks, ...)
                                    are siblings: they meet in pipeline.merged, the output's layout
    callid_core                     the shared vocabulary: imports nothing else of the project
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("callid_core", "callid", "server_sim", "pipeline")
#: what a PVFS2 client links of the server stack (the requests it builds and sends)
CLIENT_LINKS = ("server_sim.protocol", "server_sim.bmi", "server_sim.distribution")
CLIENT = ("callid.mpiio", "callid.trace", "callid.launch", "callid.replay", "callid.romio",
          "callid.server_wire")
TOP = ("callid.console", "callid.cli", "callid.run", "callid.replay.job", "callid.api")
#: the merge (the writer of a merged output) and the modules that read the output
WRITER = "pipeline.merge"
READERS = ("pipeline.merged", "pipeline.rules", "pipeline.stats", "pipeline.checks", "pipeline.insights",
           "pipeline.report", "pipeline.timeline", "pipeline.export", "pipeline.export_chrome",
           "pipeline.export_perfetto", "pipeline.export_otf2", "pipeline.warnings", "pipeline.query")


def modules(root: Path) -> dict[str, Path]:
    """Every module of the project's packages: dotted name -> file."""
    found = {}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            name = ".".join(path.relative_to(root).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def imports(root: Path) -> dict[str, set[str]]:
    """Module -> the project modules it imports anywhere in its code (lazy imports too)."""
    mods = modules(root)
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = name.split(".")
                    parts = parts[: len(parts) - node.level + (path.name == "__init__.py")]
                    base = ".".join([*parts, base] if base else parts)
                # ``from package import module`` imports that module (the package's own
                # ``__init__`` is where nothing can be imported against the direction)
                names = [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for target in names:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    targets.add(target)
        graph[name] = targets
    return graph


def _in(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def allowed(source: str, target: str) -> bool:
    """May ``source`` import ``target``?"""
    if _in(target, ("callid_core",)):
        return True
    if _in(source, ("callid_core",)):
        return False
    if _in(source, TOP) or (source, target) == ("callid", "callid.api"):  # (the package's face: its API)
        return True
    if _in(target, TOP):
        return False
    if _in(source, CLIENT_LINKS):
        return _in(target, CLIENT_LINKS)
    if _in(source, ("server_sim",)):
        return _in(target, ("server_sim",))
    if _in(source, ("pipeline",)):
        return _in(target, ("pipeline",))
    if _in(source, CLIENT):
        return _in(target, CLIENT) or _in(target, CLIENT_LINKS)
    return target == "callid" or target.startswith("callid.")  # (callid's own __init__)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def reached(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen, todo = set(), [start]
    while todo:
        for w in graph[todo.pop()] - seen:
            seen.add(w)
            todo.append(w)
    return seen


def violations(root: Path) -> list[str]:
    graph = imports(root)
    bad = [f"{s} -> {t}" for s, ts in sorted(graph.items()) for t in sorted(ts) if not allowed(s, t)]
    bad += [f"{r} reaches the writer {WRITER}" for r in READERS if WRITER in reached(graph, r)]
    return bad + [" -> ".join(c) + " (cycle)" for c in cycles(graph)]


def test_imports_go_one_way_without_cycles():
    assert violations(ROOT) == []


def test_the_check_catches_an_upward_import_and_a_cycle(tmp_path):
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    units = tmp_path / "callid_core" / "units.py"
    units.write_text(units.read_text() + "\n\ndef _late():\n    from pipeline import merge  # noqa\n")
    events = tmp_path / "server_sim" / "events.py"
    events.write_text(events.read_text() + "\nfrom callid.mpiio import file  # noqa\n")
    protocol = tmp_path / "server_sim" / "protocol.py"
    protocol.write_text(protocol.read_text() + "\nfrom server_sim import server  # noqa\n")
    lag = tmp_path / "pipeline" / "lag.py"  # (stats reads lag: a reader reaching the writer through it)
    lag.write_text(lag.read_text() + "\n\ndef _late():\n    from pipeline.merge import merge  # noqa\n")
    found = violations(tmp_path)
    assert "pipeline.stats reaches the writer pipeline.merge" in found
    assert "callid_core.units -> pipeline.merge" in found
    assert "server_sim.events -> callid.mpiio.file" in found
    assert "server_sim.protocol -> server_sim.server" in found
    assert any(v.endswith("(cycle)") and "server_sim.protocol" in v for v in found)


#: the most complex a function may be (radon's cyclomatic complexity; 21 and above is its grade D)
MAX_COMPLEXITY = 20


def test_no_function_is_too_complex():
    from radon.complexity import cc_visit

    found = [f"{path.relative_to(ROOT)}:{block.lineno} {block.fullname} ({block.complexity})"
             for path in modules(ROOT).values() for block in cc_visit(path.read_text())
             if block.complexity > MAX_COMPLEXITY]
    assert found == []


@pytest.mark.slow
def test_the_typed_surface_type_checks():
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary"], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr
