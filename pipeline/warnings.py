"""What looks wrong in a merged output, one line each: ``callid merge`` prints these after writing.

Each warning is a SQL query over the merged tables returning one row (a number and the ranks or
clocks involved) when it fires: no traced call, ranks that logged nothing or stopped early (not on a
replay that did not keep the ranks' pace: ``pipeline.lag``), server operations whose call is missing,
clocks that could not be aligned, violations left after alignment, logs without a checksum, server
event layers not logged (the event mask).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from callid_core.choices import SERVER_LAYERS
from callid_core.units import ranks_phrase
from pipeline.lag import PACE_KEPT_SQL
from pipeline.load import CHECKED
from pipeline.merged import Merged

__all__ = ["merge_warnings"]

#: a rank stopped early if its last call ended before this share of the run's span, while most of the
#: ranks (more than half) went on past STOPPED_LATE
STOPPED_EARLY, STOPPED_LATE = 0.5, 0.9

_RANKS = f"""
WITH r AS (SELECT rank, max(t_end) AS last FROM calls GROUP BY rank),
     s AS (SELECT min(t_start) AS t0, max(t_end) AS t1, max(rank) AS top FROM calls)
SELECT list(rank ORDER BY rank) FILTER (WHERE last < t0 + {STOPPED_EARLY} * (t1 - t0) AND {PACE_KEPT_SQL}),
       count(*) FILTER (WHERE last >= t0 + {STOPPED_LATE} * (t1 - t0)) * 2 > count(*),
       (SELECT list(x) FROM range((SELECT top FROM s)::BIGINT) t(x) WHERE x NOT IN (SELECT rank FROM r))
FROM r, s
"""


def _no_calls(row: tuple) -> str | None:
    (calls, ops) = row
    return (f"no traced call in the client log ({ops} server operations): did the program run under "
            "'callid run' or 'python -m callid.launch'?") if calls == 0 else None


def _ranks(row: tuple) -> str | None:
    early, most_late, missing = row
    parts = []
    if missing:
        parts.append(f"{ranks_phrase(missing)} logged no call")
    if early and most_late:
        parts.append(f"{ranks_phrase(early)} logged no call after the first {STOPPED_EARLY:.0%} of the run "
                     "while most ranks went on (stopped early? see the run's messages)")
    return "; ".join(parts) or None


def _orphans(row: tuple) -> str | None:
    (n,) = row
    return (f"{n} server operations carry a CallID that no call in the client log has (client events "
            "lost, e.g. a rank killed before it flushed)") if n else None


def _clocks(row: tuple) -> str | None:
    failed, violations = row
    parts = []
    if failed:
        parts.append(f"clocks {', '.join(failed)} could not be aligned (their times are as logged; see the "
                     "clocks table)")
    if violations:
        parts.append(f"{violations} causality violations remain after clock alignment")
    return "; ".join(parts) or None


def _unchecked(row: tuple) -> str | None:
    (logs,) = row
    if not logs:
        return None
    one = len(logs) == 1
    return (f"the {' and '.join(logs)} log{'' if one else 's'} carried no checksum (parts of a run, or "
            f"written by an earlier callid): damage to {'it' if one else 'them'} could not be detected")


def _masked(row: tuple) -> str | None:
    logged, changed = row
    parts = []
    if logged is not None and (off := [layer for layer in SERVER_LAYERS if layer not in json.loads(logged)]):
        parts.append(f"the servers did not log their {', '.join(off)} events (--server-layers): the tables "
                     "built on them (arrows, fan-out, the server figures) hold only what was logged")
    if changed:
        parts.append(f"{', '.join(changed)} changed {'its' if len(changed) == 1 else 'their'} event mask "
                     "while the run went on (callid servers events; the log layer's event_mask events "
                     "say when): events of the layers switched off in between are missing")
    return "; ".join(parts) or None


#: (query, what the row means)
CHECKS: list[tuple[str, Callable[[tuple], str | None]]] = [
    ("SELECT (SELECT count(*) FROM calls), (SELECT count(*) FROM server_ops)", _no_calls),
    (_RANKS, _ranks),
    # (an anti join: DuckDB plans the correlated NOT EXISTS by holding every column of server_ops, 3.7 GB
    # at 14 M events; server_ops has no sentinel CallID, its view makes it NULL)
    ("""SELECT count(*) FROM (SELECT callid FROM server_ops WHERE callid IS NOT NULL) o
        ANTI JOIN calls c ON c.callid = o.callid""", _orphans),
    ("""SELECT list(DISTINCT clock ORDER BY clock) FILTER (WHERE quality = 'failed'),
               coalesce(sum(violations_after), 0) FROM clocks""", _clocks),
    (f"""SELECT list(split_part(key, '.', 1) ORDER BY key) FROM run
         WHERE key IN ('client.{CHECKED}', 'server.{CHECKED}') AND value = 'no'""", _unchecked),
    ("""SELECT (SELECT json_extract(value, '$.server_layers')::VARCHAR FROM run WHERE key = 'server.config'),
               (SELECT list(DISTINCT server ORDER BY server) FROM server_ops WHERE op = 'event_mask')""",
     _masked),
]


def merge_warnings(m: Merged) -> list[str]:
    """The warnings about the merged output ``m``."""
    found = [say(m.con.execute(sql).fetchone()) for sql, say in CHECKS]
    return [w for w in found if w]
