"""``callid view``: one self-contained HTML timeline of calls, server operations and arrows.

``timeline_data`` computes (SQL, columnar arrays); ``summary_plots`` computes the
summary figures and draws them as inline SVG; ``render_html`` only fills the
template (``assets/timeline.html``), whose script draws the timeline.
"""

from __future__ import annotations

import html
import json
from importlib import resources

from callid_core import schema as S
from callid_core.atomic import replacing
from pipeline.query import connect

LAYERS = ("req", "flow", "trove", "meta")


def _index(values: list) -> tuple[list, dict]:
    table = sorted({v for v in values if v is not None})
    return table, {v: i for i, v in enumerate(table)}


def timeline_data(db: str) -> dict:
    """Columnar arrays of every call, server operation and arrow (times in µs from the start)."""
    con = connect(db)
    try:
        t0 = int(dict(con.execute("SELECT key, value FROM run").fetchall()).get("start_ns", 0))
        calls = con.execute("""SELECT rank, t_start, t_end, func, callid_hex, file, file_offset, size, bytes,
                                      callid FROM calls ORDER BY t_start""").fetchall()
        ops = con.execute("""SELECT server, layer, t_start, t_end, op, callid_hex, handle, disk_offset, size,
                                    len(callids), server || ':' || event_id FROM server_ops
                             ORDER BY t_start""").fetchall()
        arrows = con.execute(f"""SELECT callid, server || ':' || event_id, op FROM arrows
                                 WHERE layer IN ({S.DISK_LAYERS_SQL})""").fetchall()
        layout = dict(con.execute("SELECT key, value FROM run").fetchall()).get("layout", "")
    finally:
        con.close()
    ranks = sorted({c[0] for c in calls})
    servers = sorted({o[0] for o in ops})
    names, name_ix = _index([c[3] for c in calls] + [o[4] for o in ops])
    cids, cid_ix = _index([c[4] for c in calls] + [o[5] for o in ops])
    files, file_ix = _index([c[5] for c in calls])
    us = lambda t: round((t - t0) / 1000.0, 3)  # noqa: E731
    ev: dict[str, list] = {k: [] for k in ("src", "lane", "layer", "t0", "t1", "name", "cid", "file",
                                           "off", "size", "n")}

    def add(src, lane, layer, ts, te, name, cid, file, off, size, n):
        for key, value in zip(ev, (src, lane, layer, us(ts), us(te), name_ix[name],
                                   cid_ix.get(cid, -1), file, off, size, n)):
            ev[key].append(value)

    call_index = {}
    for rank, ts, te, func, cid, file, off, size, nbytes, callid in calls:
        call_index[callid] = len(ev["src"])
        add(0, ranks.index(rank), -1, ts, te, func, cid, file_ix.get(file, -1), off, nbytes or size, 1)
    op_index = {}
    for server, layer, ts, te, op, cid, _handle, off, size, n, key in ops:
        op_index[key] = len(ev["src"])
        add(1, servers.index(server), LAYERS.index(layer) if layer in LAYERS else 0, ts, te, op, cid,
            -1, off, size, n)
    arrow_cols: dict[str, list] = {"from": [], "to": [], "kind": []}
    for callid, key, op in arrows:
        arrow_cols["from"].append(call_index[callid])
        arrow_cols["to"].append(op_index[key])
        arrow_cols["kind"].append(0 if "read" in op else 1 if "write" in op else 2)
    return {"ranks": ranks, "servers": servers, "layers": list(LAYERS), "names": names, "cids": cids,
            "files": files, "events": ev, "arrows": arrow_cols, "layout": layout,
            "end": max(ev["t1"], default=0)}


# ----------------------------------------------------------------------------- summary plots

def summary_plots(db: str) -> str:
    """Fan-out and fan-in histograms, per-server load over time and the latency breakdown (SVG)."""
    con = connect(db)
    try:
        fanout = con.execute("""SELECT func, disk_ops, count(*) FROM fanout WHERE disk_ops > 0
                                GROUP BY ALL ORDER BY func, disk_ops""").fetchall()
        fanin = con.execute(f"""SELECT func, n_callids, count(DISTINCT (server, event_id)) FROM arrows
                                WHERE layer IN ({S.DISK_LAYERS_SQL})
                                GROUP BY ALL ORDER BY func, n_callids""").fetchall()
        span = con.execute("SELECT min(t_start), max(t_end) FROM server_ops").fetchall()[0]
        load = []
        if span[0] is not None:
            width = max(1, (span[1] - span[0]) // 40 + 1)
            load = con.execute(f"""SELECT server, (t_start - {span[0]}) // {width} AS bucket,
                                          sum(size), count(*) FROM server_ops
                                   WHERE layer IN ({S.DISK_LAYERS_SQL})
                                   GROUP BY ALL ORDER BY ALL""").fetchall()
        latency = con.execute(f"""
            WITH per_call AS (
                SELECT c.callid, c.func, c.t_end - c.t_start AS total,
                       max(s.t_end) - min(s.t_start) AS server_span,
                       min(s.t_start) FILTER (WHERE s.layer IN ({S.DISK_LAYERS_SQL}))
                           - min(s.t_start) AS queue,
                       sum(s.t_end - s.t_start) FILTER (WHERE s.layer IN ({S.DISK_LAYERS_SQL})) AS disk
                FROM calls c
                JOIN (SELECT unnest(callids) AS callid, layer, t_start, t_end FROM server_ops) s
                     USING (callid)
                GROUP BY c.callid, c.func, c.t_start, c.t_end)
            SELECT func, avg(greatest(total - server_span, 0)) / 1000, avg(coalesce(queue, 0)) / 1000,
                   avg(least(coalesce(disk, 0), server_span)) / 1000
            FROM per_call GROUP BY func ORDER BY func""").fetchall()
    finally:
        con.close()
    plots = []
    for func in sorted({f for f, _, _ in fanout}):
        rows = [(str(k), n) for f, k, n in fanout if f == func]
        plots.append(_bars(f"fan-out of {func}: calls by disk operations per call", rows))
        rows = [(str(k), n) for f, k, n in fanin if f == func]
        plots.append(_bars(f"fan-in of {func}: its disk operations by calls they serve", rows))
    for column, title in ((2, "bytes"), (3, "disk operations")):
        series = {}
        for row in load:
            series.setdefault(row[0], {})[row[1]] = row[column]
        plots.append(_lines(f"{title} per server over time (40 buckets)", series))
    plots.append(_stacked("latency per call (mean µs): outside the servers | queue | disk",
                          [(f, [a or 0, b or 0, c or 0]) for f, a, b, c in latency]))
    return "\n".join(plots)


_COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"]


def _svg(title: str, body: str, w: int = 420, h: int = 180) -> str:
    return (f'<figure><svg width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg">{body}</svg>'
            f"<figcaption>{html.escape(title)}</figcaption></figure>")


def _bars(title: str, rows: list[tuple[str, float]]) -> str:
    if not rows:
        return _svg(title, '<text x="10" y="20">no data</text>')
    top = max(v for _, v in rows) or 1
    bw = min(40, 380 // len(rows))
    body = "".join(
        f'<rect x="{30 + i * bw}" y="{150 - 130 * v / top:.1f}" width="{bw - 2}" height="{130 * v / top:.1f}"'
        f' fill="{_COLORS[0]}"><title>{html.escape(k)}: {v}</title></rect>'
        f'<text x="{30 + i * bw + bw / 2:.1f}" y="165" font-size="9" text-anchor="middle">'
        f"{html.escape(k)}</text>"
        for i, (k, v) in enumerate(rows))
    return _svg(title, body + f'<text x="2" y="20" font-size="9">{top}</text>')


def _lines(title: str, series: dict[str, dict[int, float]]) -> str:
    if not series:
        return _svg(title, '<text x="10" y="20">no data</text>')
    top = max(v for s in series.values() for v in s.values()) or 1
    body = ""
    for i, (name, points) in enumerate(sorted(series.items())):
        path = " ".join(f"{30 + 9 * b},{150 - 130 * points.get(b, 0) / top:.1f}" for b in range(40))
        color = _COLORS[i % len(_COLORS)]
        body += (f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.5"/>'
                 f'<text x="380" y="{20 + 12 * i}" font-size="10" fill="{color}">'
                 f"{html.escape(name)}</text>")
    return _svg(title, body + f'<text x="2" y="20" font-size="9">{top:.0f}</text>')


def _stacked(title: str, rows: list[tuple[str, list[float]]]) -> str:
    if not rows:
        return _svg(title, '<text x="10" y="20">no data</text>')
    top = max(sum(parts) for _, parts in rows) or 1
    body = ""
    for i, (label, parts) in enumerate(rows):
        x = 150
        for j, part in enumerate(parts):
            w = 250 * part / top
            body += (f'<rect x="{x:.1f}" y="{10 + 16 * i}" width="{w:.1f}" height="12" fill="{_COLORS[j]}">'
                     f"<title>{part:.1f} µs</title></rect>")
            x += w
        body += f'<text x="2" y="{20 + 16 * i}" font-size="9">{html.escape(label)}</text>'
    return _svg(title, body, h=max(60, 20 + 16 * len(rows)))


# ----------------------------------------------------------------------------- page

def render_html(data: dict, plots: str) -> str:
    """Fill the page template: the data as JSON, the plots as SVG."""
    template = resources.files("pipeline").joinpath("assets/timeline.html").read_text()
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return template.replace("%%PLOTS%%", plots).replace("%%DATA%%", payload)


def write_timeline(db: str, out: str) -> int:
    """Write the timeline page (temporary name, then rename); return the number of events."""
    data = timeline_data(db)
    page = render_html(data, summary_plots(db))
    with replacing(out) as tmp:
        tmp.write_text(page)
    return len(data["events"]["src"])
