"""``callid view``: one self-contained HTML timeline that stays small and fast whatever the trace.

The page carries, computed in SQL and shipped as compressed integer columns (``_column``):

* the lanes: one per selected rank (its calls), one per server and layer (req, flow, trove, meta);
* **full detail** of the selection's earliest events: every call, server operation and arrow
  starting before a cut time, chosen so that together they are at most ``detail`` (an arrow
  counts at the later start of its two ends); overlapping server operations on sub-lanes;
* a **summary** of the rest: per lane, time bins from the cut (events, bytes, busy time,
  dominant operation), and the arrows counted per pair of (lane, bin) ends.

Earliest first keeps the detail one coherent stretch of time, complete on every lane (zoom
into it and nothing is missing); any other stretch, rank or file is detailed by selecting it
(``--window``, ``--ranks``, ``--files``, ``--servers``).  The page's script
(``assets/timeline.html``) only decodes and draws.
"""

from __future__ import annotations

import base64
import html
import time
import zlib
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import duckdb
import numpy as np

from callid_core.atomic import replacing
from callid_core.errors import BadValue
from callid_core.ids import Layout
from callid_core.jsonout import for_script
from pipeline.merged import Merged
from pipeline.selection import Selection, select_views
from pipeline.tracks import LAYERS, LaneAssigner

__all__ = ["MAX_DETAIL", "sublanes", "write_timeline"]

#: most events (calls, server operations, arrows) a page may carry in full detail.  Each costs ~10 bytes of
#: page (compressed) and some 100 bytes and a fraction of a µs a redraw in the browser: on the 20 M-event
#: synthetic trace, 2 M make a 19 MB page that headless Chromium opens in 1.5 s, and redrawing all of the
#: detail takes 0.7 s (200 k, the default: 3 MB, 0.1 s); beyond, pages and redraws get too slow, so a
#: larger --detail is refused rather than written.
MAX_DETAIL = 2_000_000
#: events in full detail unless told (--detail): a page of ~3 MB that redraws in ~0.1 s
DETAIL = 200_000
#: non-empty summary cells (lane x time bin) at most: a few MB of page, drawn in milliseconds
SUMMARY_CELLS = 250_000
#: time bins per lane in the summary: at least (then lanes are limited, see MAX_LANES), at most
MIN_BINS, MAX_BINS = 16, 4096
#: most lanes a page can summarise (SUMMARY_CELLS / MIN_BINS)
MAX_LANES = SUMMARY_CELLS // MIN_BINS
#: most arrow bundles (pairs of (lane, bin) ends) in the summary: time bins are coarsened to fit, down
#: to ARROW_TIME_BINS over the summarised time, then the ranks they start from are grouped
ARROW_PAIRS = 100_000
ARROW_TIME_BINS = 96
#: resolution of the search for the cut between detail and summary (bins over the selection)
FINE_BINS = 1 << 16
#: DuckDB's memory for the view's joins (the selection's arrows join every server operation): beyond it
#: they spill to a temporary directory, so a 20 M-event trace takes ~1 GB instead of ~3 GB for ~10% more time
MEMORY_LIMIT = "1GB"


# ----------------------------------------------------------------------------- encoding

def _column(values: np.ndarray, delta: bool = False) -> dict:
    """An integer column for the page: optionally delta-coded, in the narrowest signed width,
    byte-shuffled (the i-th bytes of every value together) and zlib-compressed, base64."""
    v = np.asarray(values, dtype=np.int64)
    if delta and len(v):
        v = np.diff(v, prepend=np.int64(0))
    lo, hi = (int(v.min()), int(v.max())) if len(v) else (0, 0)
    dtype = next(t for t in (np.int8, np.int16, np.int32, np.int64)
                 if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max)
    raw = v.astype(np.dtype(dtype).newbyteorder("<"))
    shuffled = raw.view(np.uint8).reshape(-1, raw.itemsize).T.tobytes()
    return {"n": int(len(v)), "w": raw.itemsize, "d": int(delta),
            "z": base64.b64encode(zlib.compress(shuffled, 6)).decode()}


def _fetch(con: duckdb.DuckDBPyConnection, sql: str) -> dict[str, np.ndarray]:
    """A query's columns as numpy arrays (the SQL leaves no nulls)."""
    return {k: np.asarray(v) for k, v in con.execute(sql).fetchnumpy().items()}


# ----------------------------------------------------------------------------- sub-lanes

def sublanes(lane: np.ndarray, t0: np.ndarray, t1: np.ndarray) -> np.ndarray:
    """Per event, its sub-lane in its lane, so that events on one sub-lane never overlap: the exports'
    lanes (:class:`pipeline.tracks.LaneAssigner`; an event of no duration lasts 1 ns there)."""
    lane, t0, t1 = (np.asarray(a, np.int64) for a in (lane, t0, t1))
    out = np.zeros(len(lane), dtype=np.int64)
    if len(lane):
        order = np.argsort(t0, kind="stable")
        out[order] = LaneAssigner(int(lane.max()) + 1).assign(lane[order], t0[order],
                                                              np.maximum(t1, t0 + 1)[order])
    return out


# ----------------------------------------------------------------------------- the data

def _lanes(con: duckdb.DuckDBPyConnection, sel: Selection) -> list[tuple[int, int | None, str | None,
                                                                             str | None]]:
    """(lane, rank, server, layer): the selected ranks that made calls, then each server's layers."""
    ranks = [r for (r,) in con.execute("SELECT DISTINCT rank FROM calls ORDER BY rank").fetchall()
             if sel.ranks is None or r in sel.ranks]
    servers = [(s, layer) for s, layer in con.execute("SELECT DISTINCT server, layer FROM server_ops")
               .fetchall() if not sel.servers or s in sel.servers]
    servers.sort(key=lambda s: (s[0], LAYERS.index(s[1]) if s[1] in LAYERS else len(LAYERS), s[1]))
    rows: list[tuple[int, int | None, str | None, str | None]] = [(i, r, None, None)
                                                                  for i, r in enumerate(ranks)]
    rows += [(len(ranks) + i, None, s, layer) for i, (s, layer) in enumerate(servers)]
    return rows


def _cut(con: duckdb.DuckDBPyConnection, lo: int, hi: int, t0: int, detail: int) -> tuple[int | None, int]:
    """The cut time (ns from the run's start; None: everything fits) and the events before it:
    the largest fine-bin edge with at most ``detail`` calls, server operations and arrows before."""
    width = max(1, -(-(hi + 1 - lo) // FINE_BINS))
    counts = np.zeros(FINE_BINS + 1, dtype=np.int64)
    for sql in (f"SELECT (t_rel_ns - {lo}) // {width} AS b, count(*) AS n FROM sel_calls GROUP BY b",
                f"SELECT (t_rel_ns - {lo}) // {width} AS b, count(*) AS n FROM sel_ops GROUP BY b",
                f"SELECT (greatest(call_t_start - {t0}, t_rel_ns) - {lo}) // {width} AS b, count(*) AS n "
                "FROM sel_arrows GROUP BY b"):
        got = _fetch(con, sql)
        np.add.at(counts, np.clip(got["b"].astype(np.int64), 0, FINE_BINS), got["n"].astype(np.int64))
    total = int(counts.sum())
    if total <= detail:
        return None, total
    cum = np.cumsum(counts)
    k = int(np.searchsorted(cum, detail, side="right"))  # bins [0, k) fit
    return lo + k * width, int(cum[k - 1]) if k else 0


def timeline_data(m: Merged, sel: Selection, detail: int,
                  on_step: Callable[[str], None] = lambda name: None) -> tuple[dict, dict, dict]:
    """The page's metadata, its columns and a summary of what it holds."""
    if detail > MAX_DETAIL:
        raise BadValue(f"--detail {detail}: at most {MAX_DETAIL} events fit a page in full detail (a larger "
                       f"page is too slow to open and draw); use --detail {MAX_DETAIL} or less, and "
                       "--window, --ranks, --files or --servers to choose what is detailed")
    with m.settings(memory_limit=MEMORY_LIMIT):
        return _timeline_data(m.con, m.path, sel, detail, on_step)


def _timeline_data(con: duckdb.DuckDBPyConnection, db: str, sel: Selection, detail: int,
                   on_step: Callable[[str], None]) -> tuple[dict, dict, dict]:
    on_step("selecting")
    run = dict(con.execute("SELECT key, value FROM run").fetchall())
    t0 = int(run.get("start_ns", 0))
    layout = Layout.parse(run.get("layout") or "64/23")
    bits, mask = layout.counter_bits, layout.counter_mask
    select_views(con, sel)
    if not con.execute("SELECT EXISTS (FROM sel_calls) OR EXISTS (FROM sel_ops)").fetchone()[0]:
        raise sel.empty("view")
    lanes = _lanes(con, sel)
    if len(lanes) > MAX_LANES:
        raise BadValue(f"{len(lanes)} lanes: at most {MAX_LANES} fit a page; select ranks (--ranks) or "
                       "servers (--servers)")
    con.execute("CREATE OR REPLACE TEMP TABLE tl_lanes AS SELECT unnest(?::INTEGER[]) AS lane, "
                "unnest(?::INTEGER[]) AS rank, unnest(?::VARCHAR[]) AS server, unnest(?::VARCHAR[]) AS layer",
                [list(col) for col in zip(*lanes)] if lanes else [[], [], [], []])
    # every name a call or an operation has ('?': none), calls' first: their colours and legend
    funcs = sorted(f for (f,) in con.execute("SELECT DISTINCT coalesce(func, '?') FROM calls").fetchall())
    names = funcs + sorted({o for (o,) in con.execute("SELECT DISTINCT coalesce(op, '?') FROM server_ops")
                            .fetchall()} - set(funcs))
    con.execute("CREATE OR REPLACE TEMP TABLE tl_names AS SELECT unnest(?::VARCHAR[]) AS name, "
                "generate_subscripts(?::VARCHAR[], 1) - 1 AS id", [names, names])
    lo, hi, end = con.execute("""
        SELECT min(t), max(t), max(e) FROM (
            SELECT t_rel_ns AS t, t_rel_ns + dur_ns AS e FROM sel_calls
            UNION ALL SELECT t_rel_ns, t_rel_ns + dur_ns FROM sel_ops)""").fetchone()
    meta: dict = {
        "db": Path(db).name, "selection": sel.describe(), "layout": str(layout),
        "digits": list(layout.hex_digits), "counter_bits": bits, "names": names, "n_funcs": len(funcs),
        "lanes": [[0 if r is not None else 1, f"rank {r}" if r is not None else f"{s} {layer}"]
                  for _, r, s, layer in lanes],
        "key_base": MAX_BINS + 1, "span": [0, 0], "cut": None, "bin": 0, "arrow_bin": 0, "arrow_group": 1,
        "files": [], "limits": {
            "detail": detail, "max_detail": MAX_DETAIL, "summary_cells": SUMMARY_CELLS,
            "arrow_pairs": ARROW_PAIRS},
    }
    cols: dict[str, dict] = {}
    counts = {"detail_calls": 0, "detail_ops": 0, "detail_arrows": 0, "summarised_calls": 0,
              "summarised_ops": 0, "summarised_arrows": 0, "summary_cells": 0, "arrow_bundles": 0}
    if lo is None:  # nothing selected
        meta["counts"] = counts
        return meta, cols, counts
    lo, hi, end = int(lo), int(hi), int(end)
    meta["span"] = [lo, max(end, lo + 1)]

    on_step("choosing the detail")
    cut, _ = _cut(con, lo, hi, t0, detail)
    before = "true" if cut is None else f"t_rel_ns < {cut}"  # (a column of sel_calls and sel_ops)
    meta["cut"] = cut

    on_step("detail: calls")
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE d_calls AS
        SELECT row_number() OVER (ORDER BY c.t_start, c.rank, c.counter) - 1 AS idx, c.callid, l.lane,
               c.t_rel_ns AS t0, c.dur_ns AS dur, n.id AS name, c.file,
               coalesce(c.file_offset, -1) AS off, coalesce(c.size, -1) AS size,
               coalesce(c.bytes, -1) AS nbytes,
               coalesce((c.callid >> {bits})::BIGINT, -1) AS cr,
               coalesce((c.callid & {mask})::BIGINT, -1) AS cc,
               coalesce(c.collective, false)::INTEGER + 2 * (c.error IS NOT NULL)::INTEGER AS flags
        FROM sel_calls c JOIN tl_lanes l ON l.rank = c.rank JOIN tl_names n ON n.name = coalesce(c.func, '?')
        WHERE {before.replace('t_rel_ns', 'c.t_rel_ns')}""")
    files = [f for (f,) in con.execute("SELECT DISTINCT file FROM d_calls WHERE file IS NOT NULL "
                                       "ORDER BY file").fetchall()]
    meta["files"] = files
    con.execute("CREATE OR REPLACE TEMP TABLE tl_files AS SELECT unnest(?::VARCHAR[]) AS file, "
                "generate_subscripts(?::VARCHAR[], 1) - 1 AS id", [files, files])
    c = _fetch(con, """SELECT d.*, coalesce(f.id, -1) AS fid FROM d_calls d LEFT JOIN tl_files f USING (file)
                       ORDER BY idx""")
    for key, name, delta in (("t0", "t0", True), ("dur", "dur", False), ("lane", "lane", False),
                             ("name", "name", False), ("fid", "file", False), ("off", "off", False),
                             ("size", "size", False), ("nbytes", "bytes", False), ("cr", "cr", False),
                             ("cc", "cc", False), ("flags", "flags", False)):
        cols[f"c_{name}"] = _column(c[key], delta)
    cols["c_sub"] = _column(sublanes(c["lane"].astype(np.int64), c["t0"].astype(np.int64),
                                     (c["t0"] + c["dur"]).astype(np.int64)))
    counts["detail_calls"] = len(c["idx"])

    on_step("detail: server operations")
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE d_ops AS
        SELECT row_number() OVER (ORDER BY o.t_start, o.server, o.event_id) - 1 AS idx, o.server, o.event_id,
               l.lane, o.t_rel_ns AS t0, o.dur_ns AS dur, n.id AS name,
               coalesce((o.callid >> {bits})::BIGINT, -1) AS cr,
               coalesce((o.callid & {mask})::BIGINT, -1) AS cc,
               coalesce(len(o.callids), 0) AS ncid, coalesce(o.rank, -1) AS rank,
               coalesce((o.handle >> 32)::BIGINT, -1) AS hhi,
               coalesce((o.handle & 4294967295)::BIGINT, -1) AS hlo,
               coalesce(o.disk_offset, -1) AS off, coalesce(o.size, -1) AS size
        FROM sel_ops o JOIN tl_lanes l ON l.server = o.server AND l.layer = o.layer
        JOIN tl_names n ON n.name = coalesce(o.op, '?')
        WHERE {before.replace('t_rel_ns', 'o.t_rel_ns')}""")
    o = _fetch(con, "SELECT * EXCLUDE (server, event_id) FROM d_ops ORDER BY idx")
    on_step("sub-lanes")
    sub = sublanes(o["lane"].astype(np.int64), o["t0"].astype(np.int64),
                   (o["t0"] + o["dur"]).astype(np.int64))
    for key, delta in (("t0", True), ("dur", False), ("lane", False), ("name", False), ("cr", False),
                       ("cc", False), ("ncid", False), ("rank", False), ("hhi", False), ("hlo", False),
                       ("off", False), ("size", False)):
        cols[f"o_{key}"] = _column(o[key], delta)
    cols["o_sub"] = _column(sub)
    counts["detail_ops"] = len(o["idx"])

    on_step("detail: arrows")
    # an arrow's kind: to a Trove read, a Trove write, or any other disk operation (metadata: the key/value
    # store's, a datafile's creation, a flush)
    kind = ("CASE WHEN a.layer <> 'trove' THEN 2 WHEN a.op LIKE '%read%' THEN 0 "
            "WHEN a.op LIKE '%write%' THEN 1 ELSE 2 END")
    # where an arrow starts: the aggregator's request, on its lane; the call's start if that rank has no lane
    from_lane = "coalesce(fl.lane, cl.lane)"
    from_t = f"CASE WHEN fl.lane IS NULL THEN least(a.call_t_start, a.t_start) ELSE a.from_t END - {t0}"
    a = _fetch(con, f"""
        SELECT dc.idx AS call, d.idx AS op, {from_lane} AS fl, d.t0 - ({from_t}) AS lead, {kind} AS kind,
               coalesce(a.own_bytes, -1) AS nbytes
        FROM sel_arrows a JOIN d_calls dc ON dc.callid = a.callid
        JOIN d_ops d ON d.server = a.server AND d.event_id = a.event_id
        JOIN tl_lanes cl ON cl.rank = a.rank LEFT JOIN tl_lanes fl ON fl.rank = a.from_rank
        WHERE {before.replace('t_rel_ns', 'a.t_rel_ns')}
          AND {before.replace('t_rel_ns', f'a.call_t_start - {t0}')}
        ORDER BY d.idx, dc.idx""")
    for key, name in (("call", "call"), ("op", "op"), ("fl", "lane"), ("lead", "lead"), ("kind", "kind"),
                      ("nbytes", "bytes")):
        cols[f"a_{name}"] = _column(a[key], delta=key == "op")
    counts["detail_arrows"] = len(a["call"])

    if cut is not None:
        n_ranks = sum(1 for _, r, _, _ in lanes if r is not None)
        _summary(con, meta, cols, counts, cut, end, t0, kind, from_lane, from_t, len(lanes), n_ranks, on_step)
    meta["counts"] = counts
    return meta, cols, counts


def _summary(con: duckdb.DuckDBPyConnection, meta: dict, cols: dict, counts: dict, cut: int, end: int,
             t0: int, kind: str, from_lane: str, from_t: str, n_lanes: int, n_ranks: int,
             on_step: Callable[[str], None]) -> None:
    """Time bins per lane from the cut, and arrow bundles per pair of (lane, bin) ends."""
    on_step("summary: lanes")
    bins = max(MIN_BINS, min(MAX_BINS, SUMMARY_CELLS // max(1, n_lanes)))
    width = max(1, -(-(end + 1 - cut) // bins))
    meta["bin"] = width
    cells = _fetch(con, f"""
        WITH g AS (
            SELECT l.lane, (c.t_rel_ns - {cut}) // {width} AS bin, n.id AS name, count(*) AS n,
                   sum(coalesce(c.bytes, c.size, 0)) AS b, sum(c.dur_ns) AS d
            FROM sel_calls c JOIN tl_lanes l ON l.rank = c.rank
            JOIN tl_names n ON n.name = coalesce(c.func, '?')
            WHERE c.t_rel_ns >= {cut} GROUP BY ALL
            UNION ALL
            SELECT l.lane, (o.t_rel_ns - {cut}) // {width}, n.id, count(*), sum(coalesce(o.size, 0)),
                   sum(o.dur_ns)
            FROM sel_ops o JOIN tl_lanes l ON l.server = o.server AND l.layer = o.layer
            JOIN tl_names n ON n.name = coalesce(o.op, '?')
            WHERE o.t_rel_ns >= {cut} GROUP BY ALL)
        SELECT lane, bin, sum(n)::BIGINT AS n, sum(b)::BIGINT AS b, sum(d)::BIGINT AS d,
               arg_max(name, n) AS name
        FROM g GROUP BY lane, bin ORDER BY lane, bin""")
    key = cells["lane"].astype(np.int64) * (MAX_BINS + 1) + cells["bin"].astype(np.int64)
    cols["s_key"] = _column(key, delta=True)
    for k, name in (("n", "count"), ("b", "bytes"), ("d", "busy"), ("name", "name")):
        cols[f"s_{name}"] = _column(cells[k])
    counts["summary_cells"] = len(key)
    counts["summarised_calls"], counts["summarised_ops"] = (int(x or 0) for x in con.execute(f"""
        SELECT (SELECT count(*) FROM sel_calls c JOIN tl_lanes l ON l.rank = c.rank WHERE t_rel_ns >= {cut}),
               (SELECT count(*) FROM sel_ops o JOIN tl_lanes l ON l.server = o.server AND l.layer = o.layer
                WHERE t_rel_ns >= {cut})""").fetchone())

    on_step("summary: arrows")
    shift = (1 << 61) // width  # bins from the cut, before it too: integer division of positive numbers
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE s_pairs AS
        SELECT {from_lane} AS fl, (({from_t}) - {cut} + {shift * width}) // {width} - {shift} AS fb,
               tl.lane AS tl, (a.t_rel_ns - {cut} + {shift * width}) // {width} - {shift} AS tb,
               {kind} AS kind, count(*) AS n
        FROM sel_arrows a JOIN tl_lanes cl ON cl.rank = a.rank LEFT JOIN tl_lanes fl ON fl.rank = a.from_rank
        JOIN tl_lanes tl ON tl.server = a.server AND tl.layer = a.layer
        WHERE greatest(a.call_t_start - {t0}, a.t_rel_ns) >= {cut}
        GROUP BY ALL""")
    # coarsen until the bundles fit: time first (down to ARROW_TIME_BINS bins), then ranks in groups
    factor, group = 1, 1
    pairs = con.execute("SELECT count(*) FROM s_pairs").fetchone()[0]
    while pairs > ARROW_PAIRS:
        by_time = -(-(end - cut) // (width * factor)) > ARROW_TIME_BINS or group >= n_ranks
        if not by_time and group * 2 > n_ranks and -(-(end - cut) // (width * factor)) <= 1:
            break
        f, g = (2, 1) if by_time else (1, 2)
        factor, group = factor * f, group * g
        con.execute(f"""
            CREATE OR REPLACE TEMP TABLE s_pairs AS
            SELECT fl // {g} AS fl, (fb + {f << 40}) // {f} - {1 << 40} AS fb, tl,
                   (tb + {f << 40}) // {f} - {1 << 40} AS tb, kind,
                   sum(n)::BIGINT AS n
            FROM s_pairs GROUP BY ALL""")
        pairs = con.execute("SELECT count(*) FROM s_pairs").fetchone()[0]
    p = _fetch(con, f"SELECT * FROM s_pairs ORDER BY n DESC, fl, fb, tl, tb LIMIT {ARROW_PAIRS}")
    meta["arrow_bin"], meta["arrow_group"] = width * factor, group
    counts["summarised_arrows"] = int(con.execute("SELECT coalesce(sum(n), 0) FROM s_pairs").fetchone()[0])
    meta["arrows_left_out"] = counts["summarised_arrows"] - int(p["n"].sum())
    for k, name in (("fl", "fl"), ("fb", "fb"), ("tl", "tl"), ("tb", "tb"), ("kind", "kind"), ("n", "count")):
        cols[f"p_{name}"] = _column(p[k])
    counts["arrow_bundles"] = len(p["n"])
    con.execute("DROP TABLE s_pairs")


# ----------------------------------------------------------------------------- the page

def _duration(ns: float) -> str:
    """A time in the units --window takes (e.g. 12.5ms), exact enough to select with."""
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.6f}".rstrip("0").rstrip(".") + unit
    return f"{int(ns)}ns"


def _show(ns: float) -> str:
    """A time for reading (4 significant digits)."""
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.4g} {unit}"
    return f"{int(ns)} ns"


def _note(meta: dict, db: str) -> str:
    """What the page shows in full detail, what it summarises and which option details it (HTML)."""
    c, lim = meta["counts"], meta["limits"]
    detail = c["detail_calls"] + c["detail_ops"] + c["detail_arrows"]
    parts = [f"<b>Selection</b>: {html.escape(meta['selection'])}."]
    if meta["span"] == [0, 0]:
        parts.append("Nothing is selected: widen --window, --ranks, --files or --servers.")
    elif meta["cut"] is None:
        parts.append(f"<b>All of it in full detail</b>: {c['detail_calls']:,} calls, "
                     f"{c['detail_ops']:,} server operations, {c['detail_arrows']:,} arrows.")
    else:
        cut, end = meta["cut"], meta["span"][1]
        summarised = c["summarised_calls"] + c["summarised_ops"] + c["summarised_arrows"]
        parts.append(
            (f"<b>Full detail</b> up to {_show(cut)}: the earliest {detail:,} events "
             f"({c['detail_calls']:,} calls, {c['detail_ops']:,} server operations, "
             f"{c['detail_arrows']:,} arrows; --detail {lim['detail']:,}). " if detail else
             f"<b>Nothing in full detail</b> (--detail {lim['detail']:,}). ") +
            f"<b>Summarised</b> (hatched) from {_show(cut)} to {_show(end)}: {summarised:,} events "
            f"({c['summarised_calls']:,} calls, {c['summarised_ops']:,} server operations, "
            f"{c['summarised_arrows']:,} arrows) as time bins of {_show(meta['bin'])} per lane (events, "
            f"bytes, busy time, dominant operation) and arrows counted per pair of bins of "
            f"{_show(meta['arrow_bin'])}" + (f" from groups of {meta['arrow_group']} ranks"
                                             if meta["arrow_group"] > 1 else "")
            + (f" ({meta['arrows_left_out']:,} arrows in the faintest bundles left out)"
               if meta.get("arrows_left_out") else "") + ". "
            f"To see a part in full detail, select it: <code>callid view {html.escape(db)} --window "
            f"{_duration(cut)}:{_duration(min(end, cut + max(cut - meta['span'][0], (end - cut) / 20)))}"
            "</code> (also --ranks, "
            f"--files, --servers; hover a bin for its command), or raise --detail (at most "
            f"{lim['max_detail']:,}).")
    parts.append("Fan-out, fan-in, server load and latency plots: "
                 f"<code>callid report {html.escape(db)}</code>.")
    return " ".join(parts)


def render_html(meta: dict, cols: dict, db: str) -> str:
    """Fill the page template: the metadata and columns as JSON, the note as HTML."""
    template = resources.files("pipeline").joinpath("assets/timeline.html").read_text()
    meta = dict(meta, db_path=db)
    return (template.replace("%%NOTE%%", _note(meta, db)).replace("%%META%%", for_script(meta))
            .replace("%%COLUMNS%%", for_script(cols)))


def write_timeline(m: Merged, out: str, sel: Selection | None = None, detail: int = DETAIL,
                   on_step: Callable[[str], None] = lambda name: None) -> dict:
    """Write the timeline page of ``m``'s selection ``sel`` with at most ``detail`` events in full
    detail (temporary name, then rename); return what it holds."""
    start = time.perf_counter()
    meta, cols, counts = timeline_data(m, sel or Selection(), detail, on_step)
    on_step("writing the page")
    page = render_html(meta, cols, m.path)
    with replacing(out) as tmp:
        tmp.write_text(page)
    size = Path(out).stat().st_size
    detail_events = counts["detail_calls"] + counts["detail_ops"] + counts["detail_arrows"]
    summarised = counts["summarised_calls"] + counts["summarised_ops"] + counts["summarised_arrows"]
    return {"output": out, "bytes": size, "detail_events": detail_events, "summarised_events": summarised,
            "detail_until_ns": meta["cut"], "bin_ns": meta["bin"], "lanes": len(meta["lanes"]), **counts,
            "seconds": round(time.perf_counter() - start, 3)}
