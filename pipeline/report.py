"""``callid report``: one self-contained HTML page to read first (in the spirit of PyDarshan's job summary).

``compute_report`` computes every figure (SQL over the merged database, bounded output: bins and
top-N; the figures ``callid stats`` has come from :func:`pipeline.stats.compute_stats`, the findings
from :func:`pipeline.checks.run_checks` and :func:`pipeline.insights.run_insights`).
``render_report`` and ``render_report_comparison`` only draw: they put the figures as JSON into the
template ``assets/report.html``, whose script draws the tables and the SVG plots.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from callid_core import config as C
from callid_core import schema as S
from callid_core.atomic import replacing
from callid_core.choices import Payload
from callid_core.ids import Layout
from callid_core.jsonout import for_script
from pipeline.checks import CheckResults, run_checks
from pipeline.domain import ARROW_OPS_SQL, DATA_CALLS_SQL, DISK_DATA_SQL
from pipeline.insights import compare_insights, count_insights, run_insights
from pipeline.lag import ReplayLag
from pipeline.merged import Merged
from pipeline.rules import analysing
from pipeline.source import PAYLOAD_NONE_TIMES, SIDE_BY_SIDE, job_text
from pipeline.stats import compute_stats, start_stats
from pipeline.why import explain_many, render_why

__all__ = ["FIGURES", "compare_reports", "compute_report", "render_report", "render_report_comparison",
           "write_report"]

#: time bins of the rank x time and server x time heatmaps
TIME_BINS = 100
#: rows of the rank x time heatmap at most: with more ranks, consecutive ranks share a row
RANK_ROWS = 64
#: a fan-out or fan-in histogram has one bin per value up to this maximum, else power-of-2 bins
EXACT_MAX = 16
#: files listed (those with the most time in MPI-IO calls)
TOP_FILES = 50
#: findings of each check shown as examples
CHECK_EXAMPLES = 3
#: ranks and calls named per example finding
NAMED_MAX = 10

DIRECTIONS = ("read", "write")

#: the run's figures, in the order the overview shows them: key, label, kind (how to print the value), group
FIGURES = [
    ("ranks", "ranks", "count", "run"), ("io_servers", "I/O servers", "count", "run"),
    ("meta_servers", "metadata servers", "count", "run"), ("files", "files", "count", "run"),
    ("duration_ns", "duration (first call to last event)", "ns", "run"),
    ("calls", "MPI-IO calls", "count", "run"), ("server_ops", "server events", "count", "run"),
    ("io_time_ns", "time in MPI-IO calls (all ranks)", "ns", "run"),
    ("read_bytes", "bytes read", "bytes", "data"), ("write_bytes", "bytes written", "bytes", "data"),
    ("read_calls", "read calls", "count", "data"), ("write_calls", "write calls", "count", "data"),
    ("read_mib_per_s", "read bandwidth (bytes / read span)", "mibs", "data"),
    ("write_mib_per_s", "write bandwidth (bytes / write span)", "mibs", "data"),
    ("read_mib_per_s_by_slowest", "read bandwidth by slowest rank", "mibs", "data"),
    ("write_mib_per_s_by_slowest", "write bandwidth by slowest rank", "mibs", "data"),
    ("disk_ops", "disk data operations", "count", "disks"),
    ("disk_read_bytes", "disk bytes read", "bytes", "disks"),
    ("disk_write_bytes", "disk bytes written", "bytes", "disks"),
    ("max_calls_per_disk_op", "fan-in: most calls one disk operation served", "count", "disks"),
    ("insights_high", "insights: high", "count", "findings"),
    ("insights_warning", "insights: warning", "count", "findings"),
    ("check_errors", "callid check: errors", "count", "findings"),
    ("check_warnings", "callid check: warnings", "count", "findings"),
    ("checks_undecidable", "callid check: checks not decidable from the source", "count", "findings"),
]


def _rows(con, sql: str) -> list[dict]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def _mib_per_s(nbytes: int, ns: int) -> float | None:
    return round(nbytes / 1048576 / (ns / 1e9), 3) if nbytes and ns else None


def _span(con) -> tuple[int, int, int]:
    """The run's first instant, last instant and the width of one of :data:`TIME_BINS` time bins."""
    t0, t1 = con.execute("""
        SELECT min(s), max(e) FROM (SELECT min(t_start) AS s, max(t_end) AS e FROM calls
                                    UNION ALL SELECT min(t_start), max(t_end) FROM server_ops)""").fetchone()
    if t0 is None:
        return 0, 0, 1
    return t0, t1, (t1 - t0) // TIME_BINS + 1


def _directions(con) -> dict:
    """Per direction: data calls, bytes, the span from the first start to the last end and the
    slowest rank's time in them (Darshan's bandwidth 'by slowest')."""
    rows = {r["direction"]: r for r in _rows(con, f"""
        WITH d AS (SELECT direction, rank, bytes, t_start, t_end, dur_ns FROM ({DATA_CALLS_SQL})),
             per_rank AS (SELECT direction, max(ns)::BIGINT AS slowest_rank_ns
                          FROM (SELECT direction, rank, sum(dur_ns) AS ns FROM d GROUP BY ALL) GROUP BY ALL)
        SELECT direction, count(*) AS calls, coalesce(sum(bytes), 0)::BIGINT AS bytes,
               (max(t_end) - min(t_start))::BIGINT AS span_ns, any_value(slowest_rank_ns) AS slowest_rank_ns
        FROM d JOIN per_rank USING (direction) GROUP BY direction""")}
    out = {}
    for direction in DIRECTIONS:
        r = rows.get(direction, {"calls": 0, "bytes": 0, "span_ns": 0, "slowest_rank_ns": 0})
        out |= {f"{direction}_calls": r["calls"], f"{direction}_bytes": r["bytes"],
                f"{direction}_span_ns": r["span_ns"], f"{direction}_slowest_rank_ns": r["slowest_rank_ns"],
                f"{direction}_mib_per_s": _mib_per_s(r["bytes"], r["span_ns"]),
                f"{direction}_mib_per_s_by_slowest": _mib_per_s(r["bytes"], r["slowest_rank_ns"])}
    return out


def _log2_bins(rows: list[tuple], groups: tuple | list) -> dict:
    """Power-of-2 histogram from SQL rows (group, k, count): bin k holds [2^k, 2^(k+1)); every bin
    from the smallest to the largest present, a count per group."""
    ks = [k for _, k, _ in rows]
    bins = list(range(min(ks), max(ks) + 1)) if ks else []
    counts = {g: [0] * len(bins) for g in groups}
    for g, k, n in rows:
        counts[g][k - bins[0]] = n
    return {"lo": [1 << k for k in bins], "hi": [(2 << k) - 1 for k in bins], "counts": counts}


def _value_bins(rows: list[tuple], groups: tuple | list) -> dict:
    """Histogram of counts from SQL rows (group, value, count): one bin per value if the largest is at
    most :data:`EXACT_MAX`, else bins 0, 1, 2-3, 4-7, ... (powers of 2); every bin from the smallest
    value's to the largest's."""
    values = [v for _, v, _ in rows]
    exact = max(values, default=0) <= EXACT_MAX
    low = (lambda v: v) if exact else (lambda v: v and 1 << (v.bit_length() - 1))  # noqa: E731
    lows = sorted({low(v) for v in values})
    if exact:
        lows = list(range(lows[0], lows[-1] + 1)) if lows else []
    else:
        lows = ([0] if lows[0] == 0 else []) + [1 << k for k in range(max(lows[0], 1).bit_length() - 1,
                                                                     lows[-1].bit_length())]
    index = {lo: i for i, lo in enumerate(lows)}
    counts = {g: [0] * len(lows) for g in groups}
    for g, v, n in rows:
        counts[g][index[low(v)]] += n
    return {"lo": lows, "hi": [lo if exact or lo == 0 else 2 * lo - 1 for lo in lows], "counts": counts,
            "exact": exact}


def _rank_time(con, t0: int, width: int) -> dict:
    """Rank x time: per row of ranks and time bin, the ns its ranks spent in MPI-IO calls (each call
    split over the bins it overlaps)."""
    nranks = con.execute("SELECT count(DISTINCT rank) FROM calls").fetchone()[0]
    nrows = min(nranks, RANK_ROWS)
    if not nrows:
        return {"rows": [], "busy_ns": [], "bin_ns": width, "bins": TIME_BINS}
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE report_rank_rows AS
        SELECT rank, (dense_rank() OVER (ORDER BY rank) - 1) * {nrows} // {nranks} AS row
        FROM (SELECT DISTINCT rank FROM calls)""")
    rows = _rows(con, """SELECT row, min(rank) AS lo, max(rank) AS hi, count(*) AS ranks
                         FROM report_rank_rows GROUP BY row ORDER BY row""")
    cells = con.execute(f"""
        WITH c AS (SELECT g.row, c.t_start - {t0} AS s, c.t_end - {t0} AS e
                   FROM calls c JOIN report_rank_rows g USING (rank) WHERE c.t_end > c.t_start),
             b AS (SELECT row, s, e, unnest(range(s // {width}, (e - 1) // {width} + 1)) AS bin FROM c)
        SELECT row, bin, sum(least(e, (bin + 1) * {width}) - greatest(s, bin * {width}))::BIGINT
        FROM b GROUP BY ALL""").fetchall()
    busy = [[0] * TIME_BINS for _ in rows]
    for row, b, ns in cells:
        busy[row][b] = ns
    return {"rows": rows, "busy_ns": busy, "bin_ns": width, "bins": TIME_BINS}


def _server_time(con, t0: int, width: int, servers: list[str]) -> dict:
    """Server x time: per server and time bin, the bytes its disk data operations moved (each
    operation in the bin it starts in)."""
    cells = con.execute(f"""
        SELECT server, (t_start - {t0}) // {width} AS bin, sum(size)::BIGINT, count(*)
        FROM ({DISK_DATA_SQL}) GROUP BY ALL""").fetchall()
    index = {s: i for i, s in enumerate(servers)}
    nbytes = [[0] * TIME_BINS for _ in servers]
    ops = [[0] * TIME_BINS for _ in servers]
    for server, b, size, n in cells:
        nbytes[index[server]][b] = size
        ops[index[server]][b] = n
    return {"servers": servers, "bytes": nbytes, "ops": ops, "bin_ns": width, "bins": TIME_BINS}


def _files(con) -> dict:
    """Per file (the :data:`TOP_FILES` with the most time in MPI-IO): ranks, calls, bytes read and
    written, time, servers and disk operations it touched, its bytes of them."""
    total = con.execute("SELECT count(DISTINCT file) FROM calls").fetchone()[0]
    rows = _rows(con, f"""
        WITH c AS (
            SELECT file, count(DISTINCT rank) AS ranks, count(*) AS calls, sum(dur_ns)::BIGINT AS time_ns
            FROM calls WHERE file IS NOT NULL GROUP BY file ORDER BY time_ns DESC, file LIMIT {TOP_FILES}
        ), d AS (
            SELECT file, coalesce(sum(bytes) FILTER (WHERE direction = 'read'), 0)::BIGINT AS bytes_read,
                   coalesce(sum(bytes) FILTER (WHERE direction = 'write'), 0)::BIGINT AS bytes_written
            FROM ({DATA_CALLS_SQL}) SEMI JOIN c USING (file) GROUP BY file
        ), a AS (
            SELECT file, count(DISTINCT server) AS servers,
                   coalesce(sum(share_bytes), 0)::BIGINT AS disk_bytes  -- (shares: each disk byte once)
            FROM arrows SEMI JOIN c USING (file) WHERE layer IN ({S.DISK_LAYERS_SQL}) GROUP BY file
        ), o AS (
            SELECT file, count(*) AS disk_ops FROM ({ARROW_OPS_SQL}) SEMI JOIN c USING (file) GROUP BY file
        )
        SELECT c.file, c.ranks, c.calls, coalesce(d.bytes_read, 0) AS bytes_read,
               coalesce(d.bytes_written, 0) AS bytes_written, c.time_ns, coalesce(a.servers, 0) AS servers,
               coalesce(o.disk_ops, 0) AS disk_ops, coalesce(a.disk_bytes, 0) AS disk_bytes
        FROM c LEFT JOIN d USING (file) LEFT JOIN a USING (file) LEFT JOIN o USING (file)
        ORDER BY time_ns DESC, file""")
    return {"total": total, "rows": rows}


def _fan(con) -> dict:
    """Fan-out (per call that reached a disk: its disk operations, its servers; per function) and
    fan-in (per disk operation: the calls it served)."""
    per_call = "count(*) FROM fanout WHERE disk_ops > 0 GROUP BY ALL"
    funcs = [f for (f,) in con.execute("SELECT DISTINCT func FROM fanout WHERE disk_ops > 0 ORDER BY 1")
             .fetchall()]
    ops = con.execute(f"SELECT func, disk_ops, {per_call}").fetchall()
    servers = con.execute(f"SELECT func, servers, {per_call}").fetchall()
    fanin = con.execute(f"""SELECT layer, len(callids), count(*) FROM server_ops
                            WHERE layer IN ({S.DISK_LAYERS_SQL}) GROUP BY ALL""").fetchall()
    return {"funcs": funcs, "disk_ops_per_call": _value_bins(ops, funcs),
            "servers_per_call": _value_bins(servers, funcs),
            "calls_per_disk_op": _value_bins(fanin, S.DISK_LAYERS)}


def _check_summary(findings: list[dict], layout: Layout) -> list[dict]:
    """Per check that found something: its count and its first :data:`CHECK_EXAMPLES` findings."""
    counts = Counter(f["code"] for f in findings)
    first: dict[str, list[dict]] = {}
    start = 0
    for code in sorted(counts):  # run_checks lists the findings by code
        first[code] = findings[start:start + CHECK_EXAMPLES]
        start += counts[code]
    return [{"code": code, "severity": group[0]["severity"], "title": group[0]["title"],
             "count": counts[code],
             "examples": [{"ranks": f["ranks"][:NAMED_MAX], "ranks_total": len(f["ranks"]),
                           "calls": [layout.format(c) if c is not None else "none"
                                     for c in f["callids"][:NAMED_MAX]],
                           "calls_total": len(f["callids"]), "file": f["file"], "detail": f["detail"]}
                          for f in group]}
            for code, group in first.items()]


def compute_report(m: Merged, on_step: Callable[[str], None] = lambda name: None) -> dict:
    """Every figure of the report of one merged output, JSON-ready (``on_step`` names each step; the
    checks and the figures drawn from the merged tables alone are computed beside the rest, on a second
    connection)."""
    def begin() -> None:
        start_stats(m)
        m.start(_TABLES, _of_tables)
    return analysing(m, begin, lambda: _compute(m, on_step))


def _compute(m: Merged, on_step: Callable[[str], None]) -> dict:
    on_step("insights")
    insights = run_insights(m)
    on_step("checks")
    checked = run_checks(m)
    on_step("statistics")
    stats = compute_stats(m)
    on_step("figures")
    report = _figures(m, stats)
    overview = report["overview"]
    report["servers"] = _servers(stats, m.roles, overview["duration_ns"])
    report["stats"] = {k: stats[k] for k in (
        "time_by_func", "time_by_rank", "slowest_calls", "fanout_by_func", "fanin", "aggregators", "clocks",
        "server_imbalance", "rank_imbalance", "arrows", "inexact_arrows", "unattributed_server_ops")}
    _findings(report, insights, checked, m.layout)
    on_step("why")
    stamped = list(dict.fromkeys(r["callid_hex"] for r in stats["slowest_calls"] if r["callid_hex"]))
    report["why"] = {h: {"command": f"callid why {m.path} {h}", "text": render_why(why)}
                     for h, why in zip(stamped, explain_many(m, [m.layout.parse_id(h) for h in stamped]))}
    report["figures"] = FIGURES
    report["source"] = _source(stats, overview)
    if stats["rank_time_note"]:  # (figures of per-rank time: not where the replay did not keep the pace)
        overview |= {f"{d}_mib_per_s_by_slowest": None for d in DIRECTIONS}
    return report


#: the :meth:`~pipeline.merged.Handle.once` key of the figures drawn from the merged tables alone
_TABLES = ("report", "tables")


def _of_tables(m: Merged) -> dict:
    """The figures drawn from the merged tables alone (no temporary table of the handle's)."""
    con, roles = m.con, m.roles
    one = lambda sql: con.execute(sql).fetchone()[0]  # noqa: E731
    t0, t1, width = _span(con)
    servers = sorted({s for (s,) in con.execute(f"SELECT DISTINCT server FROM server_ops WHERE layer IN "
                                                f"({S.DISK_LAYERS_SQL})").fetchall()}
                     | set(roles["io"]) | set(roles["meta"]))
    disk = dict(((d, (n, b)) for d, n, b in con.execute(f"""
        SELECT direction, count(*), sum(size)::BIGINT FROM ({DISK_DATA_SQL}) GROUP BY ALL""").fetchall()))
    sizes = con.execute(f"""SELECT direction, floor(log2(size))::INTEGER, count(*)
                            FROM ({DATA_CALLS_SQL}) GROUP BY ALL""").fetchall()
    disk_sizes = con.execute(f"""SELECT direction, floor(log2(size))::INTEGER, count(*)
                                 FROM ({DISK_DATA_SQL}) WHERE size > 0 GROUP BY ALL""").fetchall()
    return {
        "overview": {
            "ranks": one("SELECT count(DISTINCT rank) FROM calls"),
            "files": one("SELECT count(DISTINCT file) FROM calls"),
            "t0_ns": t0, "t1_ns": t1, "duration_ns": t1 - t0,
            "io_time_ns": one("SELECT coalesce(sum(dur_ns), 0)::BIGINT FROM calls"),
            "bytes": one("SELECT coalesce(sum(bytes), 0)::BIGINT FROM calls"),
            **_directions(con),
            "disk_ops": sum(n for n, _ in disk.values()),
            "disk_read_bytes": disk.get("read", (0, 0))[1], "disk_write_bytes": disk.get("write", (0, 0))[1]},
        "access_sizes": _log2_bins(sizes, DIRECTIONS),
        "disk_sizes": _log2_bins(disk_sizes, DIRECTIONS),
        "rank_time": _rank_time(con, t0, width),
        "server_time": _server_time(con, t0, width, servers),
        "files": _files(con),
        "fan": _fan(con),
    }


def _figures(m: Merged, stats: dict) -> dict:
    """The run, its overview and the figures drawn from the merged tables."""
    config, roles = m.config, m.roles
    synthetic = "synth" in config
    tables = m.once(_TABLES, lambda: _of_tables(m))
    overview = {"ranks": None, "io_servers": len(roles["io"]), "meta_servers": len(roles["meta"]),  # (order)
                **tables["overview"], "calls": stats["calls"], "server_ops": stats["server_ops"],
                "max_calls_per_disk_op": stats["fanin"]["max_calls_per_disk_op"]}
    return {
        "run": {"run_id": stats["run_id"], "description": stats["description"], "layout": stats["layout"],
                "source": stats["source"],
                "clock_sync": stats["clock_sync"], "synthetic": synthetic,
                "strip_size": config.get("strip_size") or (None if synthetic else C.DEFAULT_STRIP_SIZE),
                "flow_buffer": config.get("flow_buffer") or (None if synthetic else C.DEFAULT_FLOW_BUFFER),
                "io_servers": roles["io"], "meta_servers": roles["meta"]},
        "overview": overview,
        **{k: v for k, v in tables.items() if k != "overview"},
    }


def _servers(stats: dict, roles: dict[str, list[str]], duration_ns: int) -> list[dict]:
    """Each server's role, operations, bytes, busy time and share of the run."""
    per_server = {r["server"]: r for r in stats["bytes_per_server"]}
    return [
        {"server": s["server"], "role": ",".join(r for r in ("io", "meta") if s["server"] in roles[r]),
         "ops": s["ops"], "bytes_read": per_server.get(s["server"], {}).get("bytes_read", 0),
         "bytes_written": per_server.get(s["server"], {}).get("bytes_written", 0), "busy_ns": s["busy_ns"],
         "busy_share": round(s["busy_ns"] / duration_ns, 4) if duration_ns else None,
         "unattributed": per_server.get(s["server"], {}).get("unattributed", 0)}
        for s in stats["servers"]]


def _findings(report: dict, insights: list[dict], checked: CheckResults, layout: Layout) -> None:
    """The insights and the checks' findings into ``report``, and their counts into its overview."""
    counts = count_insights(insights)
    report["insights"] = [{k: v for k, v in f.items() if k != "callids"}
                          | {"calls": [layout.format(c) for c in f["callids"]]} for f in insights]
    report["checks"] = _check_summary(checked.findings, layout)
    # the checks the source cannot decide (a replay), each with what it lacks; not findings
    report["checks_undecidable"] = [{k: u[k] for k in ("code", "severity", "title", "missing", "reason")}
                                    for u in checked.undecidable]
    checks = Counter(f["severity"] for f in checked.findings)
    report["overview"] |= {"insights_high": counts["high"], "insights_warning": counts["warning"],
                           "check_errors": checks.get("error", 0), "check_warnings": checks.get("warning", 0),
                           "checks_undecidable": len(checked.undecidable)}


def _source(stats: dict, overview: dict) -> dict | None:
    """A replay's source beside the replay: its job, notes, the share of the job's I/O the log holds,
    the job's figures and the replay's side by side, the lag (None: not a replay)."""
    if not stats["source"]:
        return None
    rows = []
    if stats["job_side"]:
        layer, job = stats["job_side"]
        replay = {"bytes_read": overview["read_bytes"], "bytes_written": overview["write_bytes"],
                  "reads": overview["read_calls"], "writes": overview["write_calls"],
                  **{f"{d}_span_s": overview[f"{d}_span_ns"] / 1e9 for d in DIRECTIONS}}
        rows = [{"label": label, "kind": "bytes" if key.startswith("bytes") else "num" if key.endswith("_s")
                 else "count", "job": job.get(key), "replay": replay[key]} for key, label in SIDE_BY_SIDE]
    lag = stats["replay_lag"]
    return {"description": stats["source"], "notes": stats["source_notes"], "sample": stats["sample"],
            "job": job_text(stats["source_job"]) if stats["source_job"] else None,
            "layer": stats["job_side"][0] if stats["job_side"] else None, "side_by_side": rows,
            "lag": ReplayLag.from_dict(lag).text() if lag else None, "pace_note": stats["rank_time_note"],
            "payload_note": None if stats["payload"] == Payload.FULL.value else PAYLOAD_NONE_TIMES}


def compare_reports(datas: list[dict]) -> dict:
    """Each later run against the first: the overview figures (value, and the ratio to the first's)
    and the insights that appeared or disappeared."""
    first = datas[0]["overview"]
    rows = []
    for key, label, kind, group in FIGURES:
        values = [d["overview"].get(key) for d in datas]
        ratios = [round(v / first[key], 4) if v is not None and first.get(key) else None for v in values[1:]]
        rows.append({"key": key, "label": label, "kind": kind, "group": group, "values": values,
                     "ratios": ratios})
    return {"figures": rows, "insights": [compare_insights(datas[0]["insights"], d["insights"])
                                          for d in datas[1:]]}


def _page(payload: dict) -> str:
    template = resources.files("pipeline").joinpath("assets/report.html").read_text()
    return template.replace("%%DATA%%", for_script(payload))


def render_report(data: dict, name: str = "") -> str:
    """The report page of one run (the figures of :func:`compute_report`)."""
    return _page({"mode": "single", "names": [name], "runs": [data]})


def render_report_comparison(names: list[str], datas: list[dict]) -> str:
    """The page comparing runs side by side (the first is the reference)."""
    return _page({"mode": "compare", "names": names, "runs": datas, "compare": compare_reports(datas)})


def write_report(runs: list[Merged], output: str, on_step: Callable[[str], None] = lambda name: None) -> dict:
    """Write the report of one run, or the comparison of several (temporary name, then rename);
    ``on_step`` names each step."""
    start = time.monotonic()
    datas = [compute_report(m, lambda step, m=m: on_step(f"{m.path}: {step}")) for m in runs]
    on_step("drawing")
    names = [m.path for m in runs]
    page = render_report(datas[0], names[0]) if len(runs) == 1 else render_report_comparison(names, datas)
    with replacing(output) as tmp:
        Path(tmp).write_text(page)
    return {"output": str(output), "bytes": len(page.encode()), "runs": len(runs),
            "seconds": round(time.monotonic() - start, 3)}
