"""``callid insights LOG.darshan``: Drishti's insights from a Darshan log's counters, no replay needed.

Each insight is one file ``pipeline/darshan_sql/CODE_name.sql``, decided in SQL over the log's
counter tables (:mod:`pipeline.darshan_counters`: ``posix``, ``mpiio``, ``stdio``, ``job``) with
Drishti's triggers and thresholds (drishti-io 0.8, ``drishti/includes/module.py``).  Its header has
the keys of a merged run's insight (:mod:`pipeline.insights`) and ``drishti``: the Drishti codes it
covers; its query returns the same columns, plus ``drishti`` (the Drishti code of the row: P05 for
small reads, P06 for small writes) and ``example`` (a short recommendation as code: a hint, an option,
an MPI-IO or HDF5 call, written for callid).  Where an insight exists on merged runs too, the code is
the same (P701 is small requests on both); the others are numbered after them.

Where Drishti fails on a log (an empty executable name, a DXT module it cannot read, hints without
``cb_nodes``), these queries still answer: they read the counters alone and never the DXT segments.
The catalogue (:data:`pipeline.insights.DARSHAN_INSIGHTS`) is listed in docs/insights.md.
"""

from __future__ import annotations

import duckdb

from pipeline.darshan_counters import read_counters
from pipeline.insights import DARSHAN_INSIGHTS, THRESHOLDS, finding, named_query
from pipeline.merged import Handle

__all__ = ["darshan_insights"]


def darshan_insights(path: str, codes: list[str] | None = None) -> list[dict]:
    """The findings of the insights (all, or those of ``codes``) on the Darshan log at ``path``, by code."""
    insights = DARSHAN_INSIGHTS.select(codes)
    counters = read_counters(path)
    with Handle(counters.path, duckdb.connect()) as h:
        counters.connect(h.con)
        for name, t in THRESHOLDS.items():
            h.con.execute(f"SET VARIABLE {name} = {float(t.value)!r}::DOUBLE")
        partial = [m for m, p in counters.modules.items() if p]
        said = f"Darshan flagged {', '.join(partial)} as partial: records are missing" if partial else ""
        return [finding(insight, dict(zip(names, row)), said)
                for insight, names, rows in DARSHAN_INSIGHTS.run(h, insights, named_query) for row in rows]
