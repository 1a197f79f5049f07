"""Why was this call slow?  One call's time along its critical path, beside its peers, with the findings
that apply to it (``callid why DB CALLID``).

The critical path is walked back from the call's end: the piece of work on the call's behalf that ended
last (a request of any rank carrying the call's CallID, or for a collective any CallID of the collective;
a collective phase of one of its ranks; the last rank's arrival at the collective) bounds the end; then the
one that ended last before that one began, and so on to the call's start.  A stretch no such work covers
is the calling rank's own time (its MPI-IO layer, copies, waiting for messages).  The pieces never
overlap and add up to the call's time.  Each request on the path is split at its server: before the
server received it, queued before its first disk operation, on the disks (the union of its disk
operations; the one that ended last bounded it), the rest of its time at the server, and its reply's way
back.  Peers: the calls of the same function and size.  Findings: the insights naming the call, a server
or rank on its path, or its file.
"""

from __future__ import annotations

import heapq
from typing import Any

from callid_core import schema as S
from callid_core.errors import InputError
from callid_core.units import human_size, plural
from pipeline.insights import SEVERITIES, run_insights
from pipeline.merged import Merged

__all__ = ["explain", "explain_many", "render_why", "slowest_callid"]

#: how far outside its request a server event may lie on the reference clock (the clocks' alignment)
_MARGIN_NS = 1_000_000_000
#: findings listed under the explanation (the first's recommendation is the call's)
FINDINGS_SHOWN = 3


def slowest_callid(m: Merged) -> int:
    """The CallID of the run's slowest stamped call."""
    rows = m.rows("SELECT callid FROM calls WHERE callid IS NOT NULL ORDER BY t_end - t_start DESC, t_start "
                  "LIMIT 1")
    if not rows:
        raise InputError(f"{m.path}: no stamped call to explain")
    return int(rows[0][0])


def explain(m: Merged, callid: int) -> dict[str, Any]:
    """Why call ``callid`` took its time (what ``callid why --json`` prints)."""
    return explain_many(m, [callid])[0]


def explain_many(m: Merged, callids: list[int]) -> list[dict[str, Any]]:
    """:func:`explain` of each call of ``callids`` (the report's slowest calls), each table read once for
    them all."""
    if not callids:
        return []
    calls, ids = _calls(m, callids)
    paths = [_critical_path(call, w) for call, w in zip(calls, _work(m, calls, ids))]
    events = _server_events(m, [p for path in paths for p in path if p["kind"] == "request"])
    peers = _peers(m, calls)
    findings = run_insights(m)  # (it makes the data_calls view: the one definition of a call's direction)
    directions = dict(m.rows("SELECT callid, direction FROM data_calls "
                             "WHERE list_contains(?::UBIGINT[], callid)", [callids]))
    out = []
    for call, path, peer in zip(calls, paths, peers):
        _split(call, path, events)
        servers = sorted({s["server"] for s in path if s.get("server")})
        ranks = sorted({s["rank"] for s in path if s.get("rank") is not None} | {call["rank"]})
        out.append({"call": call, "peers": peer, "critical_path": path, "verdict": _verdict(call, path),
                    "findings": _findings(findings, call, servers, ranks, directions.get(call["callid"]))})
    return out


def _calls(m: Merged, callids: list[int]) -> tuple[list[dict[str, Any]], list[list[int]]]:
    """The calls, in the order asked, a collective's with its ranks and its last arrival; and each one's
    CallIDs its requests carry (a collective's: those of all its calls)."""
    rel = m.sql("""SELECT callid, callid_hex, rank, func, file, file_offset, size, bytes, collective,
                          coll_seq, t_start, t_end, t_end - t_start AS dur_ns, t_rel_ns, error
                   FROM calls WHERE list_contains(?::UBIGINT[], callid) ORDER BY t_start""", [callids])
    found: dict[int, dict] = {}
    for row in rel.fetchall():
        found.setdefault(row[0], dict(zip(rel.columns, row)))
    if missing := [c for c in callids if c not in found]:
        raise InputError(f"{m.path}: no call with CallID {m.layout.format(missing[0])} (callid why DB, "
                         "with no CallID: the slowest call)")
    calls = [dict(found[c]) for c in callids]
    colls = sorted({c["coll_seq"] for c in calls if c["coll_seq"] is not None and c["collective"]})
    groups = {seq: rest for seq, *rest in m.rows(
        """SELECT coll_seq, count(*), max(t_start), arg_max(rank, t_start),
                  list(callid) FILTER (WHERE callid IS NOT NULL)
           FROM calls WHERE list_contains(?::BIGINT[], coll_seq) AND collective GROUP BY coll_seq""",
        [colls])}
    ids = []
    for call in calls:
        if call["coll_seq"] in groups and call["collective"]:
            ranks, last, last_rank, group = groups[call["coll_seq"]]
            call["collective_ranks"], call["last_arrival"], call["last_rank"] = ranks, last, last_rank
            ids.append(group)
        else:
            ids.append([call["callid"]])
    return calls, ids


def _work(m: Merged, calls: list[dict], ids: list[list[int]]) -> list[list[dict]]:
    """Per call, the pieces of work on its behalf (requests, collective phases, the last arrival)."""
    lo, hi = min(c["t_start"] for c in calls), max(c["t_end"] for c in calls)
    rel = m.sql("""SELECT 'request' AS kind, rank, server, op, req_seq, t_start, t_end, list(id) AS callids
                   FROM (SELECT *, unnest(callids) AS id FROM rpcs WHERE t_start < ? AND t_end > ?)
                   WHERE id IN (SELECT unnest(?::UBIGINT[])) GROUP BY ALL""",  # (list_has_any: 7x slower)
                [hi, lo, sorted({i for group in ids for i in group})])
    requests = [dict(zip(rel.columns, row)) for row in rel.fetchall()]
    colls = sorted({c["coll_seq"] for c in calls if c.get("collective_ranks")})
    rel = m.sql("""SELECT 'phase' AS kind, p.rank, NULL AS server, p.phase AS op, NULL AS req_seq,
                          p.t_start, p.t_end, c.coll_seq
                   FROM phases p JOIN calls c ON c.callid = p.callid
                   WHERE list_contains(?::BIGINT[], c.coll_seq) AND c.collective
                     AND p.phase IN ('plan', 'exchange')""", [colls])
    phases = [dict(zip(rel.columns, row)) for row in rel.fetchall()]
    return [_work_of(call, set(group), requests, phases) for call, group in zip(calls, ids)]


def _during(call: dict, work: dict) -> bool:
    return work["t_start"] < call["t_end"] and work["t_end"] > call["t_start"]


def _work_of(call: dict, ids: set[int], requests: list[dict], phases: list[dict]) -> list[dict]:
    """The call's pieces among all ``requests`` (those carrying one of ``ids``) and collective ``phases``
    read."""
    work = [{k: v for k, v in w.items() if k != "callids"} for w in requests
            if _during(call, w) and ids.intersection(w["callids"])]
    if call.get("collective_ranks"):
        work += [{k: v for k, v in w.items() if k != "coll_seq"} for w in phases
                 if _during(call, w) and w["coll_seq"] == call["coll_seq"]]
        # (no work for a collective goes on before its last rank arrives: ROMIO's first step gathers
        # every rank's ranges; a phase open before then was waiting for it)
        last = call["last_arrival"]
        work = [{**w, "t_start": max(w["t_start"], last)} for w in work if w["t_end"] > last]
        if last > call["t_start"] and call["last_rank"] != call["rank"]:
            work.append({"kind": "arrival", "rank": call["last_rank"], "server": None, "op": None,
                         "req_seq": None, "t_start": call["t_start"], "t_end": last})
    for w in work:
        w["whole"] = (w["t_start"], w["t_end"])
    return work


def _critical_path(call: dict, work: list[dict]) -> list[dict]:
    """The pieces of the call's time, in order, from its start to its end (see the module's doc).  One
    pass back over the work sorted by end: what ends at or after the cursor waits in a heap, the one of
    the call's own rank (then a request, then the earliest start) first, until the cursor passes it."""
    lo, cursor = call["t_start"], call["t_end"]
    work = sorted((w for w in work if w["t_end"] > lo), key=lambda w: -w["t_end"])
    pool: list[tuple] = []
    i = 0
    back: list[dict] = []
    while cursor > lo:
        while i < len(work) and work[i]["t_end"] >= cursor:
            w = work[i]
            heapq.heappush(pool, (w["rank"] != call["rank"], w["kind"] != "request", w["t_start"], i))
            i += 1
        while pool and work[pool[0][3]]["t_start"] >= cursor:  # (starts after the cursor: off the path)
            heapq.heappop(pool)
        if pool:
            w, end = work[heapq.heappop(pool)[3]], cursor
        else:
            while i < len(work) and work[i]["t_start"] >= cursor:
                i += 1
            if i == len(work):
                back.append(_own(call, lo, cursor))
                break
            w, end = work[i], work[i]["t_end"]
            i += 1
            if end < cursor:
                back.append(_own(call, end, cursor))
        start = max(w["t_start"], lo)
        back.append({**w, "t_start": start, "t_end": end})
        cursor = start
    return back[::-1]


def _split(call: dict, path: list[dict], events: dict[tuple, list[tuple]]) -> None:
    """Each piece's place in the call; each request's split at its server (from its ``events``)."""
    for piece in path:
        piece["at_ns"] = piece["t_start"] - call["t_start"]
        piece["dur_ns"] = piece["t_end"] - piece["t_start"]
        whole = piece.pop("whole", None)
        if piece["kind"] == "request":
            piece["request_ns"] = whole[1] - whole[0]
            key = (piece["server"], piece["rank"], piece["req_seq"])
            piece["server_side"] = _server_side(events.get(key, []), piece, whole)


def _server_events(m: Merged, requests: list[dict]) -> dict[tuple, list[tuple]]:
    """The request and disk events of these requests at their servers, by (server, rank, req_id), each
    list in order of start (one scan of the server events)."""
    if not requests:
        return {}
    lo = min(r["whole"][0] for r in requests) - _MARGIN_NS  # (the events lie within their requests, up to
    hi = max(r["whole"][1] for r in requests) + _MARGIN_NS  # the clocks' alignment: a window to prune by)
    rows = m.rows(f"""SELECT server, rank, req_id, layer, op, size, t_start, t_end FROM server_ops
                      WHERE t_start < ? AND t_end > ? AND list_contains(?, req_id)
                        AND (layer = 'req' OR layer IN ({S.DISK_LAYERS_SQL}))
                      ORDER BY t_start""", [hi, lo, sorted({r["req_seq"] for r in requests})])
    out: dict[tuple, list[tuple]] = {}
    for server, rank, req, *event in rows:
        out.setdefault((server, rank, req), []).append(tuple(event))
    return out


def _own(call: dict, start: int, end: int) -> dict:
    return {"kind": "client", "rank": call["rank"], "server": None, "op": None, "req_seq": None,
            "t_start": start, "t_end": end}


def _server_side(rows: list[tuple], piece: dict, whole: tuple[int, int]) -> dict | None:
    """The piece of a request on the path split at its server (``rows``: its events there): before the
    server received it, queued before its first disk operation, on the disks (the union of its disk
    operations), the rest of its time at the server, its reply's way back; and the request's disk
    operations, the one that ended last (None: the server logged no event of it)."""
    reqs = [r for r in rows if r[0] == "req"]
    if not reqs:
        return None
    received, served = reqs[0][3], reqs[0][4]
    disk = [r for r in rows if r[0] != "req"]
    lo, hi = piece["t_start"], piece["t_end"]

    def within(s: int, e: int) -> int:
        return max(0, min(e, hi) - max(s, lo))

    union, reach = 0, lo
    for *_, s, e in disk:  # (sorted by start: the union of the intervals, within the piece)
        union += within(max(s, reach), e)
        reach = max(reach, e)
    first = disk[0][3] if disk else served
    parts = {"in_ns": within(whole[0], received), "queued_ns": within(received, first), "disk_ns": union,
             "reply_ns": within(served, whole[1])}
    parts["other_ns"] = max(0, piece["t_end"] - piece["t_start"] - sum(parts.values()))
    last = max(disk, key=lambda r: r[4], default=None)
    return {**parts, "disk_ops": len(disk), "last_disk_op": _op(last)}


def _op(row: tuple | None) -> dict | None:
    if row is None:
        return None
    layer, op, size, s, e = row
    return {"layer": layer, "op": op, "size": size, "dur_ns": e - s}


def _peers(m: Merged, calls: list[dict]) -> list[dict]:
    """Per call, its peers (the calls of its function and size): how many, their median time, how many
    are slower."""
    rows = dict((i, rest) for i, *rest in m.rows(
        """SELECT q.i, count(*), median(c.t_end - c.t_start)::BIGINT,
                  count(*) FILTER (WHERE c.t_end - c.t_start > q.dur)
           FROM (SELECT unnest(?::BIGINT[]) AS i, unnest(?::VARCHAR[]) AS func, unnest(?::BIGINT[]) AS size,
                        unnest(?::BIGINT[]) AS dur) q
           JOIN calls c ON c.func = q.func AND c.size IS NOT DISTINCT FROM q.size GROUP BY q.i""",
        [list(range(len(calls))), [c["func"] for c in calls], [c["size"] for c in calls],
         [c["dur_ns"] for c in calls]]))
    out = []
    for i, call in enumerate(calls):
        count, median, slower = rows[i]
        out.append({"calls": count, "median_ns": median, "slower": slower,
                    "ratio": round(call["dur_ns"] / median, 2) if median else None})
    return out


def _verdict(call: dict, path: list[dict]) -> dict:
    """What took most of the call's time along its path: a server's disks, its queue, the network, a rank
    the call waited for, or the calling rank itself."""
    parts: dict[tuple[str, str], int] = {}

    def add(kind: str, who: str, ns: int) -> None:
        parts[(kind, who)] = parts.get((kind, who), 0) + ns

    for p in path:
        if p["kind"] == "request" and p.get("server_side"):
            side, server = p["server_side"], p["server"]
            add("disk", server, side["disk_ns"])
            add("queue", server, side["queued_ns"] + side["other_ns"])
            add("network", server, side["in_ns"] + side["reply_ns"])
        elif p["kind"] == "request":
            add("request", p["server"], p["dur_ns"])
        elif p["kind"] == "arrival":
            add("arrival", f"rank {p['rank']}", p["dur_ns"])
        elif p["kind"] == "phase":
            add("exchange", f"rank {p['rank']}", p["dur_ns"])
        else:
            add("client", f"rank {p['rank']}", p["dur_ns"])
    (kind, who), ns = max(parts.items(), key=lambda kv: kv[1])
    return {"kind": kind, "who": who, "ns": ns,
            "share": round(ns / call["dur_ns"], 3) if call["dur_ns"] else None}


def _findings(findings: list[dict], call: dict, servers: list[str], ranks: list[int], direction: str | None,
              ) -> list[dict]:
    """The insights' ``findings`` (high, warning) that name the call, a server or rank on its path, or (a
    data call's, of ``direction``) its file, and are of its direction if of one; the most severe first,
    then the most specific."""
    scored = []
    for f in findings:
        if f["severity"] not in ("high", "warning") or f["numbers"].get("direction") not in (None, direction):
            continue
        on_file = direction is not None and call["file"] in f["files"]
        score = (3 * (call["callid"] in f["callids"]) + 2 * bool(set(servers) & set(f["servers"]))
                 + bool(set(ranks) & set(f["ranks"])) + on_file)
        if score:
            scored.append((SEVERITIES.index(f["severity"]), -score, f["code"], f))
    return [f for *_, f in sorted(scored, key=lambda s: s[:3])][:FINDINGS_SHOWN]


# -- text ---------------------------------------------------------------------------------------------


def _ms(ns: int | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.1f} ms"


def _piece(p: dict) -> str:
    if p["kind"] == "arrival":
        return f"waiting for rank {p['rank']}, the last to arrive at the collective"
    if p["kind"] == "phase":
        return f"rank {p['rank']}: " + _PHASES.get(p["op"], p["op"])
    if p["kind"] == "client":
        return f"rank {p['rank']} itself, outside any request (its MPI-IO layer, copies, messages)"
    text = f"rank {p['rank']}'s request {p['op']} to {p['server']}"
    if p["request_ns"] > p["dur_ns"]:
        text += f" ({_ms(p['request_ns'])} in all; this much of it is on the path)"
    side = p.get("server_side")
    if side is None:
        return text + " (no server event of it)"
    last = side["last_disk_op"]
    ops = (f"; its {plural(side['disk_ops'], 'disk operation')}, the last {last['op']} of "
           f"{human_size(last['size'] or 0)} taking {_ms(last['dur_ns'])}" if last else "; no disk operation")
    return (f"{text}: reaching {p['server']} {_ms(side['in_ns'])}, queued {_ms(side['queued_ns'])}, "
            f"disks {_ms(side['disk_ns'])}, other server time {_ms(side['other_ns'])}, "
            f"reply {_ms(side['reply_ns'])}{ops}")


_PHASES = {"plan": "gathering the collective's file ranges (plan)",
           "exchange": "exchanging data between the ranks and the aggregators"}
_VERDICT = {"disk": "on {who}'s disks", "queue": "queued at {who}", "network": "on the way to and from {who}",
            "request": "in requests to {who}", "arrival": "waiting for {who} to arrive",
            "exchange": "in the collective's exchange ({who})", "client": "on {who} itself, outside requests"}


def render_why(result: dict, layout: Any = None) -> str:
    """``callid why``'s text."""
    c, peers, v = result["call"], result["peers"], result["verdict"]
    where = (f" at offset {c['file_offset']} of {c['file']}" if c["file_offset"] is not None
             else f" on {c['file']}" if c["file"] else "")
    size = f" {human_size(c['size'])}" if c["size"] is not None else ""
    lines = [f"{c['func']} {c['callid_hex']} on rank {c['rank']}:{size}{where}",
             f"  took {_ms(c['dur_ns'])} (from {c['t_rel_ns'] / 1e9:.3f} s into the run)"
             + (f"; {plural(c['collective_ranks'], 'rank')} in the collective" if c.get("collective_ranks")
                else "")]
    if peers["median_ns"] is not None and peers["calls"] > 1:
        same = " of the same size" if c["size"] is not None else ""
        lines.append(f"  peers ({peers['calls']} calls of {c['func']}{same}): median "
                     f"{_ms(peers['median_ns'])}, this one {peers['ratio']}x; {peers['slower']} slower")
    lines += ["", "Critical path (from the call's start; the pieces add up to its time):"]
    for p in result["critical_path"]:
        lines.append(f"  {_ms(p['at_ns']):>10}  +{_ms(p['dur_ns']):>10}  {_piece(p)}")
    share = f"{100 * v['share']:.0f}% " if v["share"] is not None else ""
    lines += ["", f"Most of it: {share}({_ms(v['ns'])}) " + _VERDICT[v["kind"]].format(who=v["who"]) + "."]
    findings = result["findings"]
    if findings:
        lines += ["", "Findings that apply to it (callid insights):"]
        for f in findings:
            lines.append(f"  [{f['severity'].upper()}] {f['code']}: {f['detail']}")
        lines.append(f"  Recommendation: {findings[0]['recommendation']}")
    else:
        lines += ["", "No insight at warning or high names this call, a server or rank on its path, "
                  "or its file."]
    return "\n".join(lines)
