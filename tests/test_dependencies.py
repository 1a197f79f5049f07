"""Every package the code imports is one the install declares.

The product (``pip install -e .``) may import at module level only what its base dependencies
declare; what an extra declares (Spark's) only inside the functions that need it.  The tests, the
benchmarks and the docs' hooks import what the base or an extra declares.  (click once reached
``callid/cli.py`` only through the test extra's mkdocs, and ``callid`` did not start on a fresh
install.)
"""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions, requires

from tests.test_architecture import PACKAGES, ROOT

OTHERS = ("tests", "bench", "docs")  # (examples/ are the users' programs: they import mpi4py only)
DISTRIBUTIONS = packages_distributions()


def _name(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def declared() -> dict[str, str | None]:
    """Distribution -> the extra that declares it (None: a base dependency)."""
    found: dict[str, str | None] = {}
    for req in requires("callid") or []:
        name = _name(re.match(r"[A-Za-z0-9_.-]+", req)[0])
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", req)
        if extra is None:
            found[name] = None
        elif name != "callid":
            found.setdefault(name, extra[1])
    return found


def third_party_imports(folder: str) -> list[tuple[str, str, bool]]:
    """(distribution, where, at module level) of every import of another project under ``folder``."""
    local = {*PACKAGES, *OTHERS}
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        siblings = {p.stem for p in path.parent.glob("*.py")}
        tree = ast.parse(path.read_text(), str(path))
        top = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            for module in {n.split(".")[0] for n in names}:
                if module in sys.stdlib_module_names or module in local or module in siblings:
                    continue
                for dist in DISTRIBUTIONS.get(module, [module]):
                    found.append((_name(dist), f"{path.relative_to(ROOT)}:{node.lineno}", id(node) in top))
    return found


def test_the_product_imports_only_what_it_declares():
    deps = declared()
    undeclared = [(d, where) for folder in PACKAGES for d, where, _ in third_party_imports(folder)
                  if d not in deps]
    assert undeclared == [], f"imported, declared nowhere in pyproject.toml: {undeclared}"
    eager = [(d, where, f"extra {deps[d]}") for folder in PACKAGES
             for d, where, module_level in third_party_imports(folder) if module_level and deps[d]]
    assert eager == [], f"an extra's package imported at module level (a base install fails): {eager}"


def test_tests_benchmarks_and_docs_import_what_an_extra_declares():
    deps = declared()
    undeclared = [(d, where) for folder in OTHERS for d, where, _ in third_party_imports(folder)
                  if d not in deps]
    assert undeclared == [], f"imported, declared nowhere in pyproject.toml: {undeclared}"


def test_the_check_sees_an_import_of_an_undeclared_package(tmp_path, monkeypatch):
    """(The check itself: click, as cli.py imported it, is found.)"""
    (tmp_path / "callid").mkdir()
    (tmp_path / "callid" / "cli.py").write_text("import click\nimport typer\n\n\ndef f():\n"
                                                "    import pyspark\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = {(d, top) for d, _, top in third_party_imports("callid")}
    assert {("click", True), ("typer", True), ("pyspark", False)} <= found
    assert "click" not in declared()
