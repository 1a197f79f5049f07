"""``callid check``: MARMOT's catalogue of MPI-IO usage errors and consistency races, decided in SQL
over a merged database.

Each check is one file ``pipeline/check_sql/CODE_name.sql``: a header of ``-- key: value`` lines
(``severity``: error or warning, as MARMOT classifies it; ``marmot``: the section of the MARMOT
paper; ``title``: what it detects; ``rule``: the MPI standard's rule, one line; ``columns``: the
columns it decides from), then one query over the merged tables returning a finding per row:
``ranks`` (INTEGER[]), ``callids`` (UBIGINT[]), ``funcs`` (VARCHAR[]), ``file`` (VARCHAR) and
``detail`` (VARCHAR, one line).  ``check_sql/_views.sql`` defines the temporary views several checks
share (created before they run).  ``python -m pipeline.checks`` prints the table of checks
(docs/checks.md).
"""

from __future__ import annotations

import itertools
import re
import sys
from collections import Counter
from dataclasses import dataclass
from importlib import resources

import duckdb
import pyarrow as pa

from callid_core.errors import InputError
from callid_core.ids import Layout
from callid_core.schema import Column, Table
from pipeline.query import connect, header_fields, ranks_text, select_codes

__all__ = ["FINDING", "SEVERITIES", "Check", "all_checks", "count_findings", "reference_markdown",
           "render_findings", "run_checks"]

SEVERITIES = ("error", "warning")
HEADER_KEYS = ("severity", "marmot", "title", "rule", "columns")
_CODE = re.compile(r"^[A-Z]\d{3}$")

FINDING = Table("finding", "one finding of callid check", [
    Column("code", pa.string(), "the check's code, e.g. F101"),
    Column("severity", pa.string(), "error or warning"),
    Column("title", pa.string(), "what the check detects"),
    Column("ranks", pa.list_(pa.int32()), "the ranks involved"),
    Column("callids", pa.list_(pa.uint64()), "the calls involved, by CallID (null: a call without one)"),
    Column("funcs", pa.list_(pa.string()), "their MPI functions, aligned with callids"),
    Column("file", pa.string(), "the file"),
    Column("detail", pa.string(), "what is wrong, in one line"),
])


@dataclass(frozen=True)
class Check:
    """One check: its header and its query."""

    code: str
    severity: str
    marmot: str
    title: str
    rule: str
    columns: str
    sql: str


def all_checks() -> list[Check]:
    """Every check, by code."""
    out = []
    for entry in sorted(_sql_dir().iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql") and not entry.name.startswith("_"):
            out.append(_parse(entry.name, entry.read_text()))
    return out


def _sql_dir():
    return resources.files("pipeline").joinpath("check_sql")


def _parse(name: str, text: str) -> Check:
    code = name.split("_", 1)[0]
    fields = header_fields(text)
    missing = [k for k in HEADER_KEYS if not fields.get(k)]
    if not _CODE.match(code) or missing or fields["severity"] not in SEVERITIES:
        raise ValueError(f"check_sql/{name}: a header with {', '.join(HEADER_KEYS)} (severity error or "
                         f"warning) and a name CODE_*.sql are needed")
    return Check(code, *(fields[k] for k in HEADER_KEYS), text)


def run_checks(db: str, codes: list[str] | None = None) -> list[dict]:
    """The findings of the checks (all, or those of ``codes``) on the merged database ``db``, by code."""
    checks = select_codes(all_checks(), codes, "check")
    con = connect(db)
    try:
        con.execute(_sql_dir().joinpath("_views.sql").read_text())
        out = []
        for check in checks:
            try:
                rows = con.execute(check.sql).fetchall()
            except duckdb.Error as exc:
                why = str(exc).splitlines()[0]
                raise InputError(f"{db}: check {check.code} cannot run ({why})") from None
            out += [{"code": check.code, "severity": check.severity, "title": check.title,
                     "ranks": list(ranks or []), "callids": list(callids or []), "funcs": list(funcs or []),
                     "file": file, "detail": detail} for ranks, callids, funcs, file, detail in rows]
        return out
    finally:
        con.close()


def count_findings(findings: list[dict]) -> dict[str, int]:
    """Findings per severity (every severity present, 0 if none)."""
    counts = Counter(f["severity"] for f in findings)
    return {s: counts.get(s, 0) for s in SEVERITIES}


def render_findings(findings: list[dict], ran: int, layout: Layout | None = None) -> str:
    """The findings of ``ran`` checks grouped by code, with counts, each with its calls and one line of
    detail."""
    checks = {c.code: c for c in all_checks()}
    counts = count_findings(findings)
    if not findings:
        return f"callid check: no findings ({ran} checks)"
    lines = [f"callid check: {counts['error']} errors, {counts['warning']} warnings ({ran} checks)"]
    for code, group in itertools.groupby(sorted(findings, key=lambda f: f["code"]), key=lambda f: f["code"]):
        group = list(group)
        check = checks[code]
        lines += ["", f"{code} {check.severity}: {check.title} ({len(group)})   [MARMOT {check.marmot}]",
                  f"  rule: {check.rule}"]
        for f in group:
            calls = ", ".join(f"{func} {_callid(c, layout)}" for c, func in zip(f["callids"], f["funcs"]))
            where = f" {f['file']}" if f["file"] else ""
            lines.append(f"  - rank {ranks_text(f['ranks'])}{where}: {f['detail']}" + (f" ({calls})" if calls
                                                                                     else ""))
    return "\n".join(lines)


def _callid(callid: int | None, layout: Layout | None) -> str:
    if callid is None:
        return "(no CallID)"
    return layout.format(callid) if layout else str(callid)


def reference_markdown() -> str:
    """The table of checks, generated from the check files (docs/checks.md)."""
    lines = ["# The checks of `callid check`", "",
             "Generated from `pipeline/check_sql/*.sql` by `python -m pipeline.checks`; do not edit by hand.",
             "Each check is one SQL query over the merged tables ([tables.md](tables.md)); `callid check "
             "merged.duckdb` runs them all (`--json` for scripts; exit status 1 when an error is found).",
             "MARMOT sections refer to the paper \"MPI I/O Analysis and Error Detection with MARMOT\".",
             "", "| code | severity | MARMOT | detects | rule | decided from |",
             "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| `{c.code}` | {c.severity} | {c.marmot} | {c.title} | {c.rule} | {c.columns} |"
              for c in all_checks()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference_markdown())
