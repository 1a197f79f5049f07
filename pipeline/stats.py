"""Statistics of a merged database: the thesis' figures and what an engineer needs beyond them.

``compute_stats`` computes (all in SQL); ``render_stats`` only formats.
"""

from __future__ import annotations

import itertools

from callid_core import schema as S
from callid_core.choices import Payload
from callid_core.evidence import REPLAY_ORIGIN
from callid_core.units import plural, ranks_text
from pipeline.checks import count_findings, run_checks, start_checks
from pipeline.domain import ARROW_OPS_SQL, DATA_CALL_WHERE, SERVER_BUSY_SQL
from pipeline.formatting import format_rows
from pipeline.insights import compare_insights, count_insights, run_insights
from pipeline.lag import ReplayLag
from pipeline.merged import Merged
from pipeline.query import named_query
from pipeline.rules import analysing, gate
from pipeline.source import PAYLOAD_NONE_TIMES, in_the_job, job_of, job_side, job_text, notes_of, sample_text


def _rows(con, sql: str) -> list[dict]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


# per clock (over its time windows): the first window's offset, the worst quality and bound
CLOCKS_SQL = """
    SELECT clock, source,
           arg_max(quality, CASE quality WHEN 'failed' THEN 3 WHEN 'approximate' THEN 2
                                         WHEN 'accurate' THEN 1 ELSE 0 END) AS quality,
           round(arg_min(offset_ns, win) / 1e3, 3) AS offset_us,
           round(avg(drift_ppm), 3) AS drift_ppm,
           CASE WHEN count(bound_ns) = count(*) THEN round(max(bound_ns) / 1e3, 3) END AS bound_us,
           count(*) AS windows, sum(constraints)::BIGINT AS constraints, sum(dropped)::BIGINT AS dropped,
           sum(violations_before)::BIGINT AS violations_before,
           sum(violations_after)::BIGINT AS violations_after, any_value(method) AS method
    FROM clocks GROUP BY clock, source ORDER BY source, clock"""


# per MPI function: how long its calls took and how fast they moved their bytes
TIME_BY_FUNC_SQL = """
    SELECT func, count(*) AS calls, sum(dur_ns)::BIGINT AS total_ns, round(avg(dur_ns))::BIGINT AS mean_ns,
           round(quantile_cont(dur_ns, 0.95))::BIGINT AS p95_ns, max(dur_ns) AS max_ns,
           coalesce(sum(bytes), 0)::BIGINT AS bytes,
           CASE WHEN sum(bytes) > 0 AND sum(dur_ns) > 0
                THEN round(sum(bytes) / 1048576 / (sum(dur_ns) / 1e9), 1) END AS mib_per_s
    FROM calls GROUP BY func ORDER BY sum(dur_ns) DESC, func"""

# per rank: time inside MPI-IO calls and the bytes they moved
TIME_BY_RANK_SQL = """
    SELECT rank, count(*) AS calls, sum(dur_ns)::BIGINT AS io_ns, coalesce(sum(bytes), 0)::BIGINT AS bytes
    FROM calls GROUP BY rank ORDER BY rank"""

# per server: disk operations, bytes and busy time (the union of its disk operations' intervals: the
# table server_busy of the handle, which insights S801 and S808 read too)
SERVERS_SQL = f"""
    SELECT server, count(*) AS ops, sum(size)::BIGINT AS bytes, any_value(b.busy_ns) AS busy_ns
    FROM server_ops JOIN server_busy b USING (server)
    WHERE layer IN ({S.DISK_LAYERS_SQL}) GROUP BY server ORDER BY server"""

def slowest_sql(limit: int) -> str:
    """The shipped query ``latency_breakdown`` (where each call's time went, in parts that never
    overlap; see its header) over the ``limit`` slowest calls only: its first CTE picks the calls."""
    sql = named_query("latency_breakdown").sql.rstrip().rstrip(";")
    every_call = "FROM calls\n), ids AS"
    if sql.count(every_call) != 1:
        raise AssertionError("latency_breakdown.sql: its first CTE no longer picks the calls")
    return sql.replace(every_call, f"FROM calls ORDER BY call_ns DESC, t_start LIMIT {limit}\n), ids AS")


#: ranks ``callid stats`` shows on screen (the ones with the most time in MPI-IO; --json has all)
RANKS_SHOWN = 16

#: how many of the slowest calls ``callid stats`` lists
SLOWEST = 10


def _imbalance(rows: list[dict], key: str) -> float | None:
    """max / mean of ``key`` over ``rows`` (1.0: perfectly balanced)."""
    values = [r[key] or 0 for r in rows]
    mean = sum(values) / len(values) if values else 0
    return round(max(values) / mean, 3) if mean else None


#: the imbalances (max / mean) of ``stats``: figure -> what it compares (a column of its rows)
IMBALANCE = {"server_imbalance": {"ops": "ops", "bytes": "bytes", "busy_time": "busy_ns"},
             "rank_imbalance": {"io_time": "io_ns", "bytes": "bytes"}}


def compute_stats(m: Merged) -> dict:
    """All figures of ``callid stats`` as one JSON-ready dict (the checks and insights counted are those
    of :func:`run_checks` and :func:`run_insights` on ``m``, computed once per handle; the checks and the
    figures of the merged tables are computed beside the rest, on a second connection)."""
    return analysing(m, lambda: start_stats(m), lambda: _compute(m))


def start_stats(m: Merged) -> None:
    """Begin what :func:`compute_stats` can compute beside the caller's own queries (the servers' busy
    time, the checks, the figures of the merged tables) on ``m`` (:meth:`~pipeline.merged.Handle.start`)."""
    m.start_temp_table("server_busy", SERVER_BUSY_SQL)  # (first: the insights read it)
    start_checks(m)
    m.start(_TABLES, _of_tables)


#: the :meth:`~pipeline.merged.Handle.once` key of the figures drawn from the merged tables alone
_TABLES = ("stats", "tables")


def _of_tables(m: Merged) -> dict:
    """The figures drawn from the merged tables alone (no temporary table of the handle's)."""
    con = m.con
    one = lambda sql: con.execute(sql).fetchall()[0][0]  # noqa: E731
    run = m.run
    counter_bits = m.layout.counter_bits
    arrows = one("SELECT count(*) FROM arrows")
    with_arrows = one("SELECT count(DISTINCT callid) FROM arrows")
    stats = {
        "layout": run.get("layout"),
        "run_id": run.get("client.run_id"),
        "description": run.get("description"),
        "calls": one("SELECT count(*) FROM calls"),
        "server_ops": one("SELECT count(*) FROM server_ops"),
        "events": one("SELECT (SELECT count(*) FROM calls) + (SELECT count(*) FROM server_ops)"),
        # the thesis' "categories with CallID info": MPI functions and server (layer, op)
        # pairs that have at least one event carrying a CallID
        "categories_with_callid": one("""
            SELECT (SELECT count(DISTINCT func) FROM calls WHERE callid IS NOT NULL)
                 + (SELECT count(DISTINCT (layer, op)) FROM server_ops WHERE len(callids) > 0)"""),
        "distinct_callids": one("""
            SELECT count(DISTINCT id) FROM (
                SELECT callid AS id FROM calls WHERE callid IS NOT NULL
                UNION ALL SELECT unnest(callids) FROM server_ops)"""),
        "arrows": arrows,
        "callids_with_arrows": with_arrows,
        "avg_arrows_per_callid": round(arrows / with_arrows, 3) if with_arrows else 0.0,
        # arrows of operations attributed at request level only: their calls, not their bytes
        "inexact_arrows": one("SELECT count(*) FROM arrows WHERE NOT exact"),
        # the disk operations less those with an arrow (arrows are of disk operations only)
        "unattributed_server_ops": one(f"""
            SELECT (SELECT count(*) FROM server_ops WHERE layer IN ({S.DISK_LAYERS_SQL}))
                 - (SELECT count(*) FROM ({ARROW_OPS_SQL}))"""),
        # fan-in: how many calls one disk operation served (collective buffering)
        "fanin": _rows(con, f"""
            SELECT count(*) FILTER (WHERE len(callids) > 1) AS shared_disk_ops,
                   coalesce(max(len(callids)), 0) AS max_calls_per_disk_op,
                   round(coalesce(avg(len(callids)) FILTER (WHERE len(callids) > 0), 0), 2)
                       AS mean_calls_per_disk_op
            FROM server_ops WHERE layer IN ({S.DISK_LAYERS_SQL})""")[0],
        # aggregators: ranks whose requests carried other ranks' CallIDs
        "aggregators": [r for (r,) in con.execute(f"""
            SELECT DISTINCT rank FROM server_ops
            WHERE list_bool_or(list_transform(callids, lambda id: (id >> {counter_bits}) <> rank))
            ORDER BY 1""").fetchall()],  # (not unnested: 20 times faster)
        "fanout_by_func": _rows(con, f"""
            SELECT func, count(*) AS calls,
                   min(disk_ops) AS disk_ops_min, round(avg(disk_ops), 2) AS disk_ops_mean,
                   max(disk_ops) AS disk_ops_max,
                   min(servers) AS servers_min, round(avg(servers), 2) AS servers_mean,
                   max(servers) AS servers_max,
                   coalesce(sum(size) FILTER (WHERE {DATA_CALL_WHERE}), 0)::BIGINT AS bytes_requested,
                   sum(own_bytes)::BIGINT AS own_bytes, sum(share_bytes)::BIGINT AS share_bytes,
                   sum(inexact_arrows)::BIGINT AS inexact_arrows
            FROM fanout GROUP BY func ORDER BY func"""),
        "bytes_per_server": _rows(con, f"""
            SELECT server, count(*) AS ops,
                   coalesce(sum(size) FILTER (WHERE op = 'trove_read'), 0)::BIGINT AS bytes_read,
                   coalesce(sum(size) FILTER (WHERE op = 'trove_write'), 0)::BIGINT AS bytes_written,
                   count(*) FILTER (WHERE len(callids) = 0) AS unattributed
            FROM server_ops WHERE layer IN ({S.DISK_LAYERS_SQL}) GROUP BY server ORDER BY server"""),
        "time_by_func": _rows(con, TIME_BY_FUNC_SQL),
        "time_by_rank": _rows(con, TIME_BY_RANK_SQL),
        "slowest_calls": _rows(con, slowest_sql(SLOWEST)),
        "clock_sync": run.get("clock_sync"),
        "clocks": _rows(con, CLOCKS_SQL),
        # a replay: what it replayed, and how many calls say what it inferred
        "source": run.get("client.source"),
        "replayed_calls": one("SELECT count(*) FROM calls WHERE origin IS NOT NULL"),
        "inferred_calls": dict(con.execute("""
            SELECT what, count(*) FROM calls, unnest(string_split(inferred, ',')) AS u(what)
            WHERE inferred IS NOT NULL GROUP BY what ORDER BY what""").fetchall()),
    }
    # a replay: its source's job and notes, the share of the job's I/O the log holds
    job = job_of(run)
    origin = one(f"SELECT mode(origin) FROM calls WHERE origin <> '{REPLAY_ORIGIN}'")  # (a replay's)
    return stats | {"payload": m.config.get("payload", Payload.FULL.value), "source_notes": notes_of(run),
                    "source_job": job, "sample": sample_text(job), "job_side": job_side(job, origin)}


def _compute(m: Merged) -> dict:
    m.temp_table("server_busy", SERVER_BUSY_SQL)  # (SERVERS_SQL reads it)
    servers = _rows(m.con, SERVERS_SQL)
    found = run_insights(m)
    stats = m.once(_TABLES, lambda: _of_tables(m)) | {"servers": servers}
    # among the servers that moved bytes (the I/O servers; the metadata server moves none)
    io = [r for r in stats["servers"] if r["bytes"]]
    # (ratios max / mean: keyed by what they compare, no unit)
    stats["server_imbalance"] = {k: _imbalance(io, col) for k, col in IMBALANCE["server_imbalance"].items()}
    stats["rank_imbalance"] = {k: _imbalance(stats["time_by_rank"], col)
                               for k, col in IMBALANCE["rank_imbalance"].items()}
    # a replay: the lag
    lag = gate(m).lag
    stats |= {"replay_lag": lag.as_dict() if lag else None, "rank_time_note": lag.why_not() if lag else None}
    if stats["rank_time_note"]:
        stats["rank_imbalance"]["io_time"] = None
    stats["insights"] = count_insights(found)
    kept = ("code", "severity", "title", "detail", "files", "servers", "numbers")
    stats["insight_findings"] = [{k: f[k] for k in kept} for f in found]
    checks = run_checks(m)
    stats["findings"] = count_findings(checks.findings)
    # the checks this source cannot decide (a replay), apart from the findings
    stats["checks_undecidable"] = [u["code"] for u in checks.undecidable]
    return stats


def render_stats(stats: dict) -> str:
    """A readable report of :func:`compute_stats`."""
    lines = [
        f"callid statistics (run {stats['run_id']}, CallID layout {stats['layout']})",
        *([f"  {stats['description']}"] if stats.get("description") else []),
        "",
        f"  {stats['categories_with_callid']} event categories carry CallIDs",
        f"  {stats['events']} events: {stats['calls']} MPI calls, {stats['server_ops']} server operations",
        f"  {stats['distinct_callids']} distinct CallIDs",
        f"  {stats['arrows']} arrows (call -> disk operation); on average "
        f"{stats['avg_arrows_per_callid']:.2f} per CallID that has any "
        f"({stats['callids_with_arrows']} CallIDs)",
        f"  {stats['inexact_arrows']} arrows attributed at request level only (exact = false: the calls "
        "of the operation's request, their bytes unknown)",
        f"  {stats['unattributed_server_ops']} disk operations without a CallID",
        f"  fan-in: {stats['fanin']['shared_disk_ops']} disk operations served several calls "
        f"(at most {stats['fanin']['max_calls_per_disk_op']}); aggregator ranks: "
        f"{ranks_text(stats['aggregators'])}",
    ]
    undecidable = len(stats["checks_undecidable"])
    lines.append(f"  callid check: {plural(stats['findings']['error'], 'error')}, "
                 f"{plural(stats['findings']['warning'], 'warning')} of MPI-IO usage"
                 + (f", {plural(undecidable, 'check')} not decidable from this source" if undecidable else "")
                 + " (callid check DB lists them)")
    lines.append(f"  callid insights: {stats['insights']['high']} high, "
                 f"{plural(stats['insights']['warning'], 'warning')} "
                 "(callid insights DB says what to change)")
    if stats["source"]:
        inferred = ", ".join(f"{k} {v}" for k, v in stats["inferred_calls"].items()) or "nothing"
        lines += [f"  replay of {stats['source']}",
                  f"  {stats['replayed_calls']} calls replayed; calls with inferred parts (the calls' "
                  f"'inferred' column): {inferred}"]
        lines += [f"  note: {n}" for n in stats["source_notes"]]
        if stats["source_job"]:
            lines.append(f"  {job_text(stats['source_job'])}")
        if stats["job_side"]:
            lines.append(f"  {in_the_job(*stats['job_side'])}")
        if stats["sample"]:
            lines.append(f"  every figure of the replay is {stats['sample']}")
        if stats["replay_lag"]:
            lines.append(f"  {ReplayLag.from_dict(stats['replay_lag']).text()}")
    if stats["payload"] != Payload.FULL.value:
        lines.append(f"  payload {stats['payload']}: {PAYLOAD_NONE_TIMES}")
    ref = next((c["clock"] for c in stats["clocks"] if c["quality"] == "reference"), "?")
    clocks_title = (f"Clocks onto {ref} ({stats['clock_sync']} model: {ref} time = local + offset + "
                    "drift * (local - t0), within +- bound; causality violations before and after)")
    ranks = stats["time_by_rank"]
    shown = sorted(ranks, key=lambda r: -r["io_ns"])[:RANKS_SHOWN] if len(ranks) > RANKS_SHOWN else ranks
    which = (f"ms; the {len(shown)} of {len(ranks)} ranks with the most time in MPI-IO, --json lists all"
             if len(shown) < len(ranks) else "ms")
    sections = (
        ("Time per MPI function (ms; MiB/s: bytes over the calls' time)", "time_by_func", None),
        (f"Time in MPI-IO per rank ({which}; imbalance max/mean: time "
         f"{stats['rank_imbalance']['io_time'] or stats['rank_time_note']}, "
         f"bytes {stats['rank_imbalance']['bytes']})", "time_by_rank", shown),
        (f"Slowest calls and where their time went (ms; at most {SLOWEST})", "slowest_calls", None),
        ("Fan-out per MPI function (disk operations and servers per call)", "fanout_by_func", None),
        ("Disk operations and bytes per server", "bytes_per_server", None),
        ("Disk time per server (busy: the union of its disk operations; imbalance max/mean over the "
         f"I/O servers: ops {stats['server_imbalance']['ops']}, bytes {stats['server_imbalance']['bytes']}, "
         f"busy {stats['server_imbalance']['busy_time']})", "servers", None),
        (clocks_title, "clocks", None),
    )
    for title, key, rows in sections:
        if stats[key]:
            lines += ["", title, _table(rows or stats[key])]
    return "\n".join(lines)


def _table(rows: list[dict]) -> str:
    """Rows as a table; ``*_ns`` figures shown as ms (3 decimals)."""
    columns = [c[:-3] + "_ms" if c.endswith("_ns") else c for c in rows[0]]
    cells = [tuple(round(v / 1e6, 3) if k.endswith("_ns") and v is not None else v for k, v in r.items())
             for r in rows]
    return format_rows(columns, cells, "table")


#: The scalar figures ``callid stats A B ...`` puts side by side.
COMPARED = ("calls", "server_ops", "distinct_callids", "arrows", "avg_arrows_per_callid", "inexact_arrows",
            "unattributed_server_ops", "replayed_calls")


def render_comparison(names: list[str], all_stats: list[dict]) -> str:
    """Several runs' figures side by side: scalars, fan-in, aggregators, fan-out per function."""
    rows = _scalar_rows(all_stats) + _func_rows(all_stats)
    lines = [format_rows(["figure", *names], rows, "table")]
    for (a, sa), (b, sb) in itertools.pairwise(zip(names, all_stats)):
        lines += _insight_changes(a, b, sa, sb)
    return "\n".join(lines)


def _scalar_rows(all_stats: list[dict]) -> list[tuple]:
    """The scalar figures, then those of each group (fan-in, findings, insights, server imbalance)."""
    rows = [(key, *(s[key] for s in all_stats)) for key in COMPARED]
    group = lambda name: [(f"{name}.{k}", *(s[name][k] for s in all_stats))  # noqa: E731
                          for k in all_stats[0][name]]
    rows += group("fanin") + group("findings")
    rows.append(("checks_undecidable", *(len(s["checks_undecidable"]) for s in all_stats)))
    rows += group("insights")
    rows.append(("aggregators", *(ranks_text(s["aggregators"]) for s in all_stats)))
    return rows + group("server_imbalance")


def _func_rows(all_stats: list[dict]) -> list[tuple]:
    """Per MPI function: its time (ms) and fan-out figures ('-' where a run has no such call)."""
    rows = []
    for func in sorted({r["func"] for s in all_stats for r in s["fanout_by_func"]}):
        for part, key in (("time_by_func", "mean_ns"), ("time_by_func", "total_ns"),
                          ("time_by_func", "mib_per_s"), ("fanout_by_func", "disk_ops_mean"),
                          ("fanout_by_func", "servers_mean")):
            values = [next((r[key] for r in s[part] if r["func"] == func), None) for s in all_stats]
            if key.endswith("_ns"):
                key, values = key.removesuffix("_ns") + "_ms", [_ms(v) for v in values]
            rows.append((f"{func}.{key}", *("-" if v is None else v for v in values)))
    return rows


def _ms(ns: int | float | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 3)


def _insight_changes(a: str, b: str, sa: dict, sb: dict) -> list[str]:
    """The insights that appeared, disappeared and changed from run ``a`` to run ``b``."""
    diff = compare_insights(sa["insight_findings"], sb["insight_findings"])
    lines = ["", f"Insights from {a} to {b}: {len(diff['appeared'])} appeared, "
             f"{len(diff['disappeared'])} disappeared, {len(diff['changed'])} changed"]
    return lines + [f"  {sign} [{f['severity'].upper()}] {f['code']} {f['detail']}"
                     for sign, what in (("+", "appeared"), ("-", "disappeared"), ("~", "changed"))
                     for f in diff[what]]
