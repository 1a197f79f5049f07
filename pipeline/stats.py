"""Statistics of a merged database: the thesis' figures and what an engineer needs beyond them.

``compute_stats`` computes (all in SQL); ``render_stats`` only formats.
"""

from __future__ import annotations

from pipeline import schema as S
from pipeline.query import connect, format_rows

_DISK_LAYERS = ", ".join(f"'{layer}'" for layer in S.DISK_LAYERS)


def _rows(con, sql: str) -> list[dict]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def compute_stats(db: str) -> dict:
    """All figures of ``callid stats`` as one JSON-ready dict."""
    con = connect(db)
    try:
        one = lambda sql: con.execute(sql).fetchall()[0][0]  # noqa: E731
        run = dict(con.execute("SELECT key, value FROM run").fetchall())
        arrows = one("SELECT count(*) FROM arrows")
        with_arrows = one("SELECT count(DISTINCT callid) FROM arrows")
        stats = {
            "layout": run.get("layout"),
            "run_id": run.get("client.run_id"),
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
            "avg_arrows_per_callid": arrows / with_arrows if with_arrows else 0.0,
            "unattributed_server_ops": one(f"""
                SELECT count(*) FROM server_ops s WHERE layer IN ({_DISK_LAYERS})
                AND NOT EXISTS (SELECT 1 FROM arrows a WHERE a.server = s.server
                                AND a.event_id = s.event_id)"""),
            "fanout_by_func": _rows(con, """
                SELECT func, count(*) AS calls,
                       min(disk_ops) AS disk_ops_min, round(avg(disk_ops), 2) AS disk_ops_mean,
                       max(disk_ops) AS disk_ops_max,
                       min(servers) AS servers_min, round(avg(servers), 2) AS servers_mean,
                       max(servers) AS servers_max, sum(size)::BIGINT AS bytes_requested,
                       sum(disk_bytes)::BIGINT AS disk_bytes
                FROM fanout GROUP BY func ORDER BY func"""),
            "bytes_per_server": _rows(con, f"""
                SELECT server, count(*) AS disk_ops,
                       coalesce(sum(size) FILTER (WHERE op = 'trove_read'), 0)::BIGINT AS bytes_read,
                       coalesce(sum(size) FILTER (WHERE op = 'trove_write'), 0)::BIGINT AS bytes_written,
                       count(*) FILTER (WHERE len(callids) = 0) AS unattributed
                FROM server_ops WHERE layer IN ({_DISK_LAYERS}) GROUP BY server ORDER BY server"""),
        }
    finally:
        con.close()
    return stats


def render_stats(stats: dict) -> str:
    """A readable report of :func:`compute_stats`."""
    lines = [
        f"callid statistics (run {stats['run_id']}, CallID layout {stats['layout']})",
        "",
        f"  {stats['categories_with_callid']} event categories carry CallIDs",
        f"  {stats['events']} events: {stats['calls']} MPI calls, {stats['server_ops']} server operations",
        f"  {stats['distinct_callids']} distinct CallIDs",
        f"  {stats['arrows']} arrows (call -> disk operation); on average "
        f"{stats['avg_arrows_per_callid']:.2f} per CallID that has any "
        f"({stats['callids_with_arrows']} CallIDs)",
        f"  {stats['unattributed_server_ops']} disk operations without a CallID",
    ]
    for title, key in (("Fan-out per MPI function (disk operations and servers per call)",
                        "fanout_by_func"),
                       ("Disk operations and bytes per server", "bytes_per_server")):
        rows = stats[key]
        if rows:
            columns = list(rows[0])
            lines += ["", title, format_rows(columns, [tuple(r.values()) for r in rows], "table")]
    return "\n".join(lines)
