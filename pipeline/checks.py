"""``callid check``: MARMOT's catalogue of MPI-IO usage errors and consistency races, decided in SQL
over a merged database.

Each check is one file ``pipeline/check_sql/CODE_name.sql``: a header of ``-- key: value`` lines
(``severity``: error or warning, as MARMOT classifies it; ``marmot``: the section of the MARMOT
paper; ``title``: what it detects; ``rule``: the MPI standard's rule, one line; ``columns``: the
columns it decides from; ``needs``: the evidence it needs, names of :data:`callid_core.evidence.EVIDENCE`;
:mod:`pipeline.rules` loads and runs checks and insights alike), then one query over the merged tables
returning a finding per row:
``ranks`` (INTEGER[]), ``callids`` (UBIGINT[]), ``funcs`` (VARCHAR[]), ``file`` (VARCHAR) and
``detail`` (VARCHAR, one line).  ``check_sql/_views.sql`` defines the temporary views several checks
share (created before they run).  A check whose needs the source of the calls does not record (a
replay: :func:`pipeline.rules.gate`) is not run: it is listed as not decidable from this source.
``python -m pipeline.checks`` prints the table of checks (docs/checks.md).
"""

from __future__ import annotations

import itertools
import re
import sys
from collections import Counter
from dataclasses import dataclass

import pyarrow as pa

from callid_core.evidence import EVIDENCE, ORIGINS, REPLAY_ORIGIN, TRACED, Source
from callid_core.ids import Layout
from callid_core.schema import Column, Table
from callid_core.units import plural, ranks_text
from pipeline.merged import Merged
from pipeline.rules import Catalogue, gate

__all__ = ["CHECKS", "FINDING", "SEVERITIES", "CheckResults", "count_findings", "reference_markdown",
           "render_findings", "run_checks", "start_checks"]

SEVERITIES = ("error", "warning")
#: the checks: pipeline/check_sql/CODE_name.sql
CHECKS = Catalogue("check", "check_sql", re.compile(r"^[A-Z]\d{3}$"), ("severity", "marmot", "rule", "needs"),
                   (("severity", SEVERITIES),), "{code}  {severity:7}  {title}  [MARMOT {marmot}]",
                   lambda c: {"code": c.code, "severity": c.severity, "marmot": c.marmot, "title": c.title})

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


@dataclass
class CheckResults:
    """What the checks say of a merged database: the findings of those that ran, and those its source
    cannot decide (each: code, severity, title, needs, missing: what of it the source does not record,
    reason)."""

    source: Source
    findings: list[dict]
    undecidable: list[dict]
    ran: int  # checks run

    def as_json(self) -> dict:
        """``callid check --json``."""
        return {"source": {"label": self.source.label, "records": self.source.recorded()},
                "counts": count_findings(self.findings), "findings": self.findings,
                "undecidable": self.undecidable}


def run_checks(m: Merged, codes: list[str] | None = None) -> CheckResults:
    """The checks (all, or those of ``codes``) on the merged output ``m``: the findings of those its
    source can decide, by code, and the others listed as not decidable (computed once per handle)."""
    return m.once(("checks", tuple(codes or ())), lambda: _run(m, codes))


def start_checks(m: Merged) -> None:
    """Begin :func:`run_checks` (all checks) on ``m`` beside what the caller does next
    (:meth:`~pipeline.merged.Handle.start`): for a command that needs them and more."""
    m.start(("checks", ()), lambda side: _run(side, None))


def _run(m: Merged, codes: list[str] | None) -> CheckResults:
    checks = CHECKS.select(codes)
    runs = gate(m)
    decidable, undecidable = [], []
    for c in checks:
        if missing := runs.missing(c.needs):
            undecidable.append({"code": c.code, "severity": c.severity, "title": c.title,
                                "needs": list(c.needs), "missing": missing, "reason": runs.reason(missing)})
        else:
            decidable.append(c)
    findings = []
    for check, _, rows in CHECKS.run(m, decidable):
        findings += [{"code": check.code, "severity": check.severity, "title": check.title,
                      "ranks": list(ranks or []), "callids": list(callids or []),
                      "funcs": list(funcs or []), "file": file, "detail": detail}
                     for ranks, callids, funcs, file, detail in rows]
    return CheckResults(runs.source, _unexplained_failures(findings), undecidable, len(decidable))


#: the check of calls the MPI library failed: listed unless another finding names the call (its cause)
FAILED_CALL = "E601"


def _unexplained_failures(findings: list[dict]) -> list[dict]:
    """``findings`` without the failed calls (:data:`FAILED_CALL`) whose every call another finding names."""
    named = {c for f in findings if f["code"] != FAILED_CALL for c in f["callids"]}
    return [f for f in findings if f["code"] != FAILED_CALL or not set(f["callids"]) <= named]


def count_findings(findings: list[dict]) -> dict[str, int]:
    """Findings per severity (every severity present, 0 if none)."""
    counts = Counter(f["severity"] for f in findings)
    return {s: counts.get(s, 0) for s in SEVERITIES}


def render_findings(results: CheckResults, layout: Layout | None = None) -> str:
    """The findings grouped by code, with counts, each with its calls and one line of detail; then the
    checks not decidable from the source, each with what it needs that the source does not record."""
    checks = {c.code: c for c in CHECKS.rules()}
    findings = results.findings
    counts = count_findings(findings)
    ran = f"{results.ran} checks" + (f"; {len(results.undecidable)} not decidable from this source"
                                      if results.undecidable else "")
    if findings:
        lines = [f"callid check: {plural(counts['error'], 'error')}, {plural(counts['warning'], 'warning')} "
                 f"({ran})"]
    else:
        lines = [f"callid check: no findings ({ran})"]
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
    if results.undecidable:
        recorded = ", ".join(results.source.recorded())
        recorded = f"{recorded} only" if recorded else "nothing of its source"
        lines += ["", f"not decidable from this source ({results.source.label} records {recorded}; these are "
                      "not findings):"]
        lines += [f"  {u['code']} {u['title']} (needs {', '.join(u['missing'])})"
                  for u in results.undecidable]
    return "\n".join(lines)


def _callid(callid: int | None, layout: Layout | None) -> str:
    if callid is None:
        return "(no CallID)"
    return layout.format(callid) if layout else str(callid)


def reference_markdown() -> str:
    """The table of checks, generated from the check files (docs/checks.md), and what each source of calls
    records of what they need."""
    checks = CHECKS.rules()
    lines = ["# The checks of `callid check`", "",
             "Generated from `pipeline/check_sql/*.sql` by `python -m pipeline.checks`; do not edit by hand.",
             "Each check is one SQL query over the merged tables ([tables.md](tables.md)); `callid check "
             "merged.duckdb` runs them all (`--json` for scripts; exit status 1 when an error is found).",
             "MARMOT sections refer to the paper \"MPI I/O Analysis and Error Detection with MARMOT\".",
             "", "| code | severity | MARMOT | detects | rule | needs | decided from |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| `{c.code}` | {c.severity} | {c.marmot} | {c.title} | {c.rule} | {', '.join(c.needs)} | "
              f"{c.columns} |" for c in checks]
    lines += ["", "## What a check needs, and replays", "",
              "A check needs evidence of these kinds (its header's `-- needs:`):", "",
              "| evidence | what it is | checks that need it |", "| --- | --- | --- |"]
    lines += [f"| `{e}` | {what} | {', '.join(c.code for c in checks if e in c.needs) or '-'} |"
              for e, what in EVIDENCE.items()]
    lines += ["", f"A traced run records all of them. A replay (`callid replay`) records what its source "
              f"logged, known by the `origin` of each replayed call; the calls the replay adds of its own "
              f"(origin `{REPLAY_ORIGIN}`: one open of each file by its lowest rank, prefill writes) record "
              f"nothing of the source, and a replay makes no closes, syncs, barriers, views or waits:", "",
              "| origin | source | records | checks it decides |", "| --- | --- | --- | --- |"]
    for origin, source in ORIGINS.items():
        if source != TRACED:
            decided = ", ".join(c.code for c in checks if not source.missing(c.needs)) or "none"
            lines.append(f"| `{origin}` | {source.label} | {', '.join(source.recorded())} | {decided} |")
    lines += ["", "On a merged output whose source does not record what a check needs, the check does not "
              "run: `callid check` lists it as *not decidable from this source* with what is missing "
              "(`undecidable` in `--json`, each with its `reason`), never as a finding, and it does not "
              "count in the exit status; `callid stats` and `callid report` count and list such checks apart "
              "from the findings."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference_markdown())
