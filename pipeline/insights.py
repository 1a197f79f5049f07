"""``callid insights``: what slows the I/O down and what to change, decided in SQL over a merged database.

Two families: client-side insights use Drishti's triggers and thresholds, so that users of
Darshan see familiar results; server-side insights use what only callid has, every disk
operation on every server and the call that caused it.  Each insight is one file
``pipeline/insight_sql/CODE_name.sql``: a header of ``-- key: value`` lines (``family``: client
or server; ``title``: what it finds; ``thresholds``: the names of the thresholds it uses, or
``-``; ``columns``: the columns it decides from; optional ``needs``, e.g. ``pace``: it rests on each rank's
time, so on a replay that did not keep the ranks' pace (``pipeline.lag``) it is not computed, and says so in
an 'info' finding; :mod:`pipeline.rules` loads and runs insights and checks alike), then one query
returning one finding per row:
``severity`` ('high', 'warning', 'ok' or 'info', as Drishti grades them), ``detail`` (one line),
``recommendation`` (one line naming the option or hint to change; null for ok and info),
``numbers`` (a struct: the numbers behind the finding, key names ending in their unit), optionally
``drishti`` (the Drishti code the row's finding corresponds to, if any) and ``example`` (the
recommendation as a short piece of code),
``ranks``, ``callids``, ``files``, ``servers`` (lists, the most significant first: a finding names
at most :data:`DETAILS_MAX` of each, and its ``more`` says how many of each it leaves out).  The
thresholds are :data:`THRESHOLDS`, read in SQL as ``getvariable(name)``; ``insight_sql/_views.sql``
defines what several insights share.  On a replay of an incomplete log the client-side findings say
on how much of the job's I/O they were computed (``pipeline.source``).
``python -m pipeline.insights`` prints the table of insights (docs/insights.md).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from callid_core import config as C
from callid_core.choices import MpiIo
from callid_core.ids import Layout
from callid_core.units import plural
from pipeline.domain import DATA_CALLS_SQL, DISK_DATA_SQL, SERVER_BUSY_SQL
from pipeline.merged import Merged
from pipeline.rules import Catalogue, Rule, gate
from pipeline.source import job_of, sample_text

__all__ = ["DARSHAN_INSIGHTS", "DETAILS_MAX", "FAMILIES", "INSIGHTS", "SEVERITIES", "THRESHOLDS", "Threshold",
           "compare_insights", "count_insights", "drishti_codes", "finding", "in_order", "named_query",
           "reference_markdown", "render_comparison", "render_insights", "run_insights", "thresholds_of"]

SEVERITIES = ("high", "warning", "ok", "info")
#: the families, in the order findings print: what went wrong in the system (a slow or failing server, a
#: late rank: the causes the others' symptoms come from), what the program does, what it caused on the servers
FAMILIES = ("faults", "client", "server")

#: at most this many ranks, calls, files and servers are named per finding (Drishti's DETAILS_MAX_SIZE)
DETAILS_MAX = 10


@dataclass(frozen=True)
class Threshold:
    """A named threshold: its value, unit, and where the value comes from."""

    value: float
    unit: str
    source: str


_DRISHTI = "Drishti's thresholds['{}'] (drishti/includes/config.py)"

#: every threshold an insight uses, by the name its SQL reads with ``getvariable``
THRESHOLDS: dict[str, Threshold] = {
    # client side: Drishti's values, so that findings match what Darshan users know
    "small_bytes": Threshold(1 << 20, "bytes", _DRISHTI.format("small_bytes") +
                             ": a request under 1 MiB is small"),
    "small_share": Threshold(0.1, "share", _DRISHTI.format("small_requests")),
    "small_count": Threshold(1000, "requests", _DRISHTI.format("small_requests_absolute")),
    "misaligned_share": Threshold(0.1, "share", _DRISHTI.format("misaligned_requests")),
    "random_share": Threshold(0.2, "share", _DRISHTI.format("random_operations")),
    "random_count": Threshold(1000, "requests", _DRISHTI.format("random_operations_absolute")),
    "rw_imbalance": Threshold(0.1, "share", _DRISHTI.format("imbalance_operations") +
                              ": reads and writes differ by more than this share of all"),
    "rank_imbalance": Threshold(0.15, "share", _DRISHTI.format("imbalance_stragglers") +
                                ": slowest and fastest rank differ by more than this share of the total"),
    "metadata_rank_ns": Threshold(30e9, "ns", _DRISHTI.format("metadata_time_rank") + ": 30 s"),
    "independent_share": Threshold(0.5, "share", _DRISHTI.format("collective_operations")),
    "independent_count": Threshold(1000, "requests", _DRISHTI.format("collective_operations_absolute")),
    "size_imbalance": Threshold(0.3, "share", _DRISHTI.format("imbalance_size") +
                                ": the ranks' bytes on one file differ by more than this share of the most"),
    "stdio_share": Threshold(0.1, "share", _DRISHTI.format("interface_stdio")),
    # server side: callid's own, each tied to the nearest Drishti margin or to the simulated file system
    "server_imbalance": Threshold(0.15, "share", "Drishti's imbalance_stragglers margin, applied to the "
                                  "I/O servers: busiest and idlest differ by more than this share"),
    "crossing_share": Threshold(0.1, "share", "Drishti's misaligned_requests share, applied to accesses "
                                "that touch more strips than their size needs"),
    "partial_share": Threshold(0.1, "share", "Drishti's misaligned_requests share, applied to disk "
                               "operations that fill only part of a flow buffer"),
    "disk_size_ratio": Threshold(0.25, "ratio", "disk operations a quarter of the requested size or less: "
                                 "each request costs at least 4 disk operations on its servers"),
    "small_disk_op": Threshold(64 * 1024, "bytes", "PVFS2's default flow buffer and strip: disk operations "
                               "smaller on average, from larger requests, come from smaller flow buffers or "
                               "strips"),
    "aggregator_imbalance": Threshold(0.15, "share", "Drishti's imbalance_stragglers margin, applied to "
                                      "the bytes of a collective's aggregators"),
    "rmw_share": Threshold(0.1, "share", "Drishti's small_requests share, applied to the bytes read back "
                           "for read-modify-write against the bytes written"),
    "redundant_share": Threshold(0.1, "share", "Drishti's small_requests share, applied to bytes read from "
                                 "disk more than once"),
    "redundant_high_share": Threshold(0.5, "share", "more than half of the bytes the disks read were read "
                                      "before: most of the reading is redundant"),
    "meta_share": Threshold(0.3, "share", "Drishti flags metadata time of 30 s per rank; here 30% of the "
                            "servers' requests or busy time on the metadata server"),
    "slow_meta_ns": Threshold(10e6, "ns", "a metadata request of 10 ms on average: a healthy metadata server "
                              "serves one in about 1 ms (here an sqlite commit; Lustre's MDS well under)"),
    "client_share": Threshold(0.5, "share", "more than half of a call's time outside the servers"),
    "aggregator_wait_share": Threshold(0.5, "share", "the ranks that do not aggregate spend half of their "
                                       "collective calls waiting for the aggregators"),
    "straggler_factor": Threshold(2.0, "ratio", "a call twice as slow as the median of its peers"),
    "noise_ns": Threshold(100e6, "ns", "a time lost or an imbalance below 100 ms is a short run's scheduling "
                          "noise (2 ranks on one core), not a finding: callid's floor under Drishti's "
                          "margins"),
    "slow_server_factor": Threshold(3.0, "ratio", "a server taking 3 times as long as the others on the same "
                                    "work (its disks, network or handling of requests)"),
    "slow_server_share": Threshold(0.1, "share", "Drishti's small_requests share, applied to the time a slow "
                                   "server lost against the time of all requests"),
    "late_rank_share": Threshold(0.15, "share", "Drishti's imbalance_stragglers margin, applied to the time "
                                 "the ranks waited for one at collective calls against all collective "
                                 "calls' time"),
}


def thresholds_of(insight: Rule) -> tuple[str, ...]:
    """The names of the thresholds an insight uses (its ``thresholds`` header)."""
    return tuple(t.strip() for t in insight.thresholds.split(",") if t.strip() not in ("", "-"))


def _unknown_thresholds(insight: Rule) -> str | None:
    unknown = [t for t in thresholds_of(insight) if t not in THRESHOLDS]
    return f"thresholds {', '.join(unknown)} are not in THRESHOLDS" if unknown else None


#: the insights: pipeline/insight_sql/CODE_name.sql
INSIGHTS = Catalogue("insight", "insight_sql", re.compile(r"^[PS]\d{3}$"), ("family", "thresholds"),
                     (("family", FAMILIES),), "{code}  {family:6}  {title}",
                     lambda i: {"code": i.code, "family": i.family, "title": i.title,
                                "thresholds": list(thresholds_of(i))}, _unknown_thresholds)


def drishti_codes(insight: Rule) -> tuple[str, ...]:
    """The Drishti codes an insight on a Darshan log covers (its ``drishti`` header)."""
    return tuple(c.strip() for c in insight.drishti.split(","))


def _bad_codes(insight: Rule) -> str | None:
    wrong = [c for c in drishti_codes(insight) if not re.fullmatch(r"[SPM]\d\d", c)]
    return f"drishti codes {', '.join(wrong)} are not Drishti's" if wrong else _unknown_thresholds(insight)


#: the insights on a Darshan log's counters (pipeline.darshan_insights): pipeline/darshan_sql/CODE_name.sql
DARSHAN_INSIGHTS = Catalogue(
    "insight", "darshan_sql", re.compile(r"^P\d{3}$"), ("family", "thresholds", "drishti"),
    (("family", FAMILIES),), "{code}  {drishti:18}  {title}",
    lambda i: {"code": i.code, "drishti": list(drishti_codes(i)), "family": i.family, "title": i.title,
               "thresholds": list(thresholds_of(i))}, _bad_codes)


def _prepare(m: Merged) -> None:
    """What the insights read besides the merged tables: the thresholds and the run's layout figures
    as variables, the servers by role, the data calls and disk data operations, the servers' busy time."""
    config = m.config
    values = {name: t.value for name, t in THRESHOLDS.items()} | {
        "strip_size": config.get("strip_size") or C.DEFAULT_STRIP_SIZE,
        "flow_buffer": config.get("flow_buffer") or C.DEFAULT_FLOW_BUFFER,
        "cb_buffer_size": C.DEFAULT_CB_BUFFER_SIZE,
        # the bounds of what callid run takes: advice stays within them
        "min_strip_size": C.MIN_STRIP_SIZE, "max_strip_size": C.MAX_STRIP_SIZE,
        "min_flow_buffer": C.MIN_FLOW_BUFFER, "max_flow_buffer": C.MAX_FLOW_BUFFER,
        "max_buffers_per_strip": C.MAX_BUFFERS_PER_STRIP,
        # 1: the files were made by callid's MPI-IO, which passes the striping hints on at create
        "striping_hints": config.get("mpi_io", MpiIo.CALLID) == MpiIo.CALLID}
    for name, value in values.items():
        m.con.execute(f"SET VARIABLE {name} = {float(value)!r}::DOUBLE")
    for role, servers in m.roles.items():
        m.con.execute(f"CREATE TEMP TABLE {role}_servers AS SELECT unnest(?::VARCHAR[]) AS server", [servers])
    m.con.execute(f"CREATE TEMP VIEW data_calls AS {DATA_CALLS_SQL}")
    m.con.execute(f"CREATE TEMP VIEW disk_data AS {DISK_DATA_SQL}")
    m.temp_table("server_busy", SERVER_BUSY_SQL)


def run_insights(m: Merged, codes: list[str] | None = None) -> list[dict]:
    """The findings of the insights (all, or those of ``codes``) on the merged output ``m``, by code
    (computed once per handle)."""
    return m.once(("insights", tuple(codes or ())), lambda: _run(m, codes))


def _run(m: Merged, codes: list[str] | None) -> list[dict]:
    insights = INSIGHTS.select(codes)
    m.once("insights prepared", lambda: _prepare(m))
    runs = gate(m)
    sample = sample_text(job_of(m.run))
    out, ready = {}, []
    for insight in insights:
        if missing := runs.missing(insight.needs):
            out[insight.code] = [_not_computed(insight, runs.reason(missing))]
        else:
            ready.append(insight)
    for insight, names, rows in INSIGHTS.run(m, ready, named_query):
        said = sample if insight.family == "client" else ""
        out.setdefault(insight.code, []).extend(finding(insight, dict(zip(names, row)), said) for row in rows)
    return [f for i in insights for f in out.get(i.code, [])]


def finding(insight: Rule, row: dict, sample: str = "") -> dict:
    """The finding of one row of an insight's query (:func:`named_query`); ``sample``: on how much of the
    job's I/O it was computed, said after its detail."""
    return {"code": insight.code, "drishti": row.get("drishti"), "family": insight.family,
            "severity": row["severity"], "title": insight.title,
            "detail": row["detail"] + (f" ({sample})" if sample else ""),
            "recommendation": row["recommendation"], "example": row.get("example"),
            "numbers": _plain(row["numbers"] or {}), **{k: list(row[k] or []) for k in NAMED},
            "more": {k: n - len(row[k] or []) for k, n in row["listed"].items() if n > len(row[k] or [])}}


#: the lists a finding names its subjects in
NAMED = ("ranks", "callids", "files", "servers")


def named_query(sql: str) -> str:
    """An insight's query, each list cut to :data:`DETAILS_MAX` (in SQL: a long list never reaches
    Python), with ``listed``: how long each list was."""
    cut = ", ".join(f"{k}[:{DETAILS_MAX}] AS {k}" for k in NAMED)
    listed = ", ".join(f"'{k}': coalesce(len({k}), 0)" for k in NAMED)
    return f"SELECT * REPLACE ({cut}), {{{listed}}} AS listed FROM (\n{sql}\n)"


def _not_computed(insight: Rule, why: str) -> dict:
    """The 'info' finding of an insight that is not computed, saying why."""
    return {"code": insight.code, "drishti": None, "family": insight.family, "severity": "info",
            "title": insight.title, "detail": why, "recommendation": None, "example": None, "numbers": {},
            **{k: [] for k in NAMED}, "more": {}}


def _plain(numbers: dict) -> dict:
    """The numbers as JSON-ready values (DuckDB hands decimals back as Decimal)."""
    return {k: float(v) if isinstance(v, Decimal) else v for k, v in numbers.items()}


def count_insights(findings: list[dict]) -> dict[str, int]:
    """Findings per severity (every severity present, 0 if none)."""
    counts = Counter(f["severity"] for f in findings)
    return {s: counts.get(s, 0) for s in SEVERITIES}


#: two runs' numbers within this share of each other are the same: on the same work, timing figures
#: (busy times, call times) vary from run to run by about this much, and a severity that flips on such
#: a difference alone is noise, not a change
NOISE_MARGIN = 0.1


def _subject(f: dict) -> tuple:
    """What a finding is about: its code, files and the words among its numbers (direction, function);
    not its severity, servers or text, which may differ between runs on the same subject."""
    words = sorted((k, v) for k, v in f.get("numbers", {}).items() if isinstance(v, str))
    return f["code"], tuple(sorted(f["files"])), tuple(words)


def _identifies(key: str) -> bool:
    """A number that names a thing (an event, a rank, a collective) rather than measures it: which one it
    names may differ between runs of the same work, and is not a change of the finding."""
    return key.endswith(("_event_id", "_rank")) or key == "coll_seq"


def _differ(x: object, y: object) -> bool:
    if isinstance(x, bool) or isinstance(y, bool) or not isinstance(x, int | float) \
            or not isinstance(y, int | float):
        return x != y
    return abs(x - y) > NOISE_MARGIN * max(abs(x), abs(y))


def compare_insights(a: list[dict], b: list[dict]) -> dict[str, list[dict]]:
    """What changed from run ``a``'s findings to run ``b``'s, matched by subject (:func:`_subject`; of
    several findings of one subject, in order): ``appeared`` (only in ``b``), ``disappeared`` (only in
    ``a``) and ``changed`` (``b``'s finding, with ``was``: ``a``'s severity, and ``changes``: the
    numbers that differ by more than :data:`NOISE_MARGIN`, as [a's, b's]; not those that only name a
    thing: :func:`_identifies`).  A finding whose numbers all stay within the margin is unchanged,
    whatever its severity and text."""
    left: dict[tuple, list[dict]] = {}
    for f in a:
        left.setdefault(_subject(f), []).append(f)
    appeared, changed = [], []
    for f in b:
        same = left.get(_subject(f))
        if not same:
            appeared.append(f)
            continue
        was = same.pop(0)
        nb, na = f.get("numbers", {}), was.get("numbers", {})
        changes = {k: [na.get(k), nb.get(k)] for k in {**na, **nb}
                   if not _identifies(k) and _differ(na.get(k), nb.get(k))}
        if changes:
            changed.append({**f, "was": was["severity"], "changes": dict(sorted(changes.items()))})
    return {"appeared": appeared, "disappeared": [f for fs in left.values() for f in fs], "changed": changed}


_ORDER = {s: i for i, s in enumerate(SEVERITIES)}


def _line(f: dict, layout: Layout | None, examples: bool = False) -> list[str]:
    where = [("files", "files", f["files"]), ("servers", "servers", f["servers"]),
             ("ranks", "ranks", [str(r) for r in f["ranks"]]),
             ("calls", "callids", [layout.format(c) if layout else str(c) for c in f["callids"]])]
    more = {k: f" and {n} more" for k, n in f.get("more", {}).items()}
    drishti = f" (Drishti {f['drishti']})" if f.get("drishti") else ""
    lines = [f"  [{f['severity'].upper()}] {f['code']}{drishti} {f['detail']}"]
    lines += [f"      {name}: {', '.join(map(str, items))}{more.get(key, '')}"
              for name, key, items in where if items]
    if f["recommendation"]:
        lines.append(f"      -> {f['recommendation']}")
    if examples and f.get("example"):
        lines += [f"         | {ln}" for ln in f["example"].splitlines()]
    return lines


def render_insights(findings: list[dict], ran: int, layout: Layout | None = None, examples: bool = False,
                    source: str = "") -> str:
    """The findings of ``ran`` insights, client side then server side, most severe first; ``examples``:
    each recommendation's example too; ``source``: what they were computed from, if not a merged run."""
    counts = count_insights(findings)
    where = f", from {source}" if source else ""
    lines = [f"callid insights: {counts['high']} high, {plural(counts['warning'], 'warning')}, "
             f"{counts['ok']} ok, {counts['info']} info ({ran} insights{where})"]
    titles = {"faults": "What went wrong (a slow or failing server, a late rank)",
              "client": "What the program does (client side, Drishti's thresholds)",
              "server": "What it caused on the servers (server side)"}
    family = None
    for f in in_order(findings):
        if f["family"] != family:
            family = f["family"]
            lines += ["", titles[family]]
        lines += _line(f, layout, examples)
    return "\n".join(lines)


def in_order(findings: list[dict]) -> list[dict]:
    """The findings in the order ``callid insights`` prints them: by family (:data:`FAMILIES`), then most
    severe first, then those that say what share of the time they account for (``numbers.impact``) the
    largest first, then by code."""
    def key(f: dict) -> tuple:
        impact = (f.get("numbers") or {}).get("impact")
        return (FAMILIES.index(f["family"]), _ORDER[f["severity"]], impact is None, -(impact or 0), f["code"])
    return sorted(findings, key=key)


def render_comparison(names: list[str], a: list[dict], b: list[dict], layout: Layout | None = None) -> str:
    """What changed from run ``names[0]`` to run ``names[1]``: the insights that appeared, disappeared
    and changed (:func:`compare_insights`)."""
    diff = compare_insights(a, b)
    lines = [f"insights from {names[0]} to {names[1]}: {len(diff['appeared'])} appeared, "
             f"{len(diff['disappeared'])} disappeared, {len(diff['changed'])} changed (numbers within "
             f"{NOISE_MARGIN:.0%} of each other are the same)"]
    for what in ("appeared", "disappeared", "changed"):
        if diff[what]:
            lines += ["", f"{what} in {names[0] if what == 'disappeared' else names[1]}:"]
            for f in sorted(diff[what], key=lambda f: (_ORDER[f["severity"]], f["code"])):
                lines += _line(f, layout) + _changes(f)
    return "\n".join(lines)


def _changes(f: dict) -> list[str]:
    """A changed finding's severity and numbers, before -> after."""
    if "changes" not in f:
        return []
    severity = [f"      severity: {f['was']} -> {f['severity']}"] if f["was"] != f["severity"] else []
    return severity + [f"      {k}: {x} -> {y}" for k, (x, y) in f["changes"].items()]


def _table(catalogue: Catalogue, second: str, of: Callable[[Rule], str]) -> list[str]:
    """A markdown table of a catalogue's insights: code, ``second`` (``of`` each), what it finds, its
    thresholds and what it decides from."""
    lines = [f"| code | {second} | finds | thresholds | decided from |", "| --- | --- | --- | --- | --- |"]
    for i in catalogue.rules():
        names = ", ".join(f"`{t}`" for t in thresholds_of(i)) or "-"
        lines.append(f"| `{i.code}` | {of(i)} | {i.title} | {names} | {i.columns} |")
    return lines


def reference_markdown() -> str:
    """The table of insights and thresholds, generated from the insight files (docs/insights.md)."""
    lines = ["# The insights of `callid insights`", "",
             "Generated from `pipeline/insight_sql/*.sql` and `pipeline/insights.py` by `python -m "
             "pipeline.insights`; do not edit by hand.",
             "Each insight is one SQL query over the merged tables ([tables.md](tables.md)); "
             "`callid insights merged.duckdb` runs them all (`--json` for scripts).  Severities are "
             "Drishti's: high, warning, ok, info.", ""]
    lines += _table(INSIGHTS, "family", lambda i: i.family)
    lines += ["", "## On a Darshan log", "",
              "`callid insights LOG.darshan` computes these from the log's counters (no replay needed) with "
              "Drishti's triggers and thresholds, as `pipeline/darshan_sql/*.sql`; each finding names the "
              "Drishti code beside callid's (`--verbose`: each recommendation's example).  The same code "
              "means the same trigger on a merged run, computed from the calls; P713 and P715 (M01, S01: "
              "no MPI-IO, STDIO) have none there, as a traced run records its MPI-IO calls alone.", ""]
    lines += _table(DARSHAN_INSIGHTS, "Drishti", lambda i: ", ".join(drishti_codes(i)))
    lines += ["", "## Thresholds", "", "| name | value | unit | where the value comes from |",
              "| --- | --- | --- | --- |"]
    lines += [f"| `{n}` | {t.value:g} | {t.unit} | {t.source} |" for n, t in THRESHOLDS.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference_markdown())
