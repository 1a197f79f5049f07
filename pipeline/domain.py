"""The domain's sets as SQL over a merged output's tables: the calls that move data, the servers' disk
data operations, and the table macros every reader's connection has."""

from __future__ import annotations

from callid_core.schema import DISK_LAYERS_SQL

#: a call that moves data (a split collective's data is its _begin's): a condition on a row of calls
DATA_CALL_WHERE = ("size > 0 AND (func LIKE 'MPI_File_%read%' OR func LIKE 'MPI_File_%write%') "
                   "AND func NOT LIKE '%\\_end' ESCAPE '\\'")
#: the calls that move data, with their direction
DATA_CALLS_SQL = ("SELECT *, CASE WHEN func LIKE '%read%' THEN 'read' ELSE 'write' END AS direction "
                  f"FROM calls WHERE {DATA_CALL_WHERE}")
#: the Trove data operations (the servers' disk reads and writes), with their direction
DISK_DATA_SQL = ("SELECT *, CASE op WHEN 'trove_read' THEN 'read' ELSE 'write' END AS direction "
                 "FROM server_ops WHERE op IN ('trove_read', 'trove_write')")

#: The disk operations that have arrows, each once (``server``, ``event_id``, ``file``): an operation
#: of one CallID has one arrow (the merge refuses a CallID of two calls), so only the arrows of those
#: of several are made distinct (a DISTINCT over every arrow took ten times as long).
ARROW_OPS_SQL = """
    SELECT server, event_id, file FROM arrows WHERE n_callids = 1
    UNION ALL
    SELECT DISTINCT server, event_id, file FROM arrows WHERE n_callids > 1"""

#: A server's busy time, the one definition stats, insights and the report use: the length of the union
#: of the intervals of its disk operations (every Trove and metadata operation: data, flush, remove,
#: getattr, keyval), per server (``server``, ``busy_ns``; servers without disk operations absent).
SERVER_BUSY_SQL = f"""
    WITH busy_spans AS (SELECT server AS k, t_start AS lo, t_end AS hi FROM server_ops
                        WHERE layer IN ({DISK_LAYERS_SQL}))
    SELECT k AS server, covered AS busy_ns FROM covered('busy_spans')"""

#: Table macros every connection has.  ``islands(t)``: the rows of the table, view or CTE named ``t``
#: (columns ``k``, ``lo``, ``hi``: a key and a range [lo, hi), times or bytes; any others kept), each
#: with ``island``: ranges of one key that overlap share an island, numbered from 1 by ``lo``.
#: ``covered(t)``: per key, the length of the union of its ranges (e.g. a server's busy time).
#: Both sweep each key's ranges by (lo, hi), with the furthest end before each range: ``covered`` adds
#: what each range reaches past it (one sort; equal ranges add nothing twice, in any order); ``islands``
#: numbers the distinct ranges (so that its two passes order them alike) and gives every row its range's.
MACROS_SQL = """
CREATE OR REPLACE TEMP MACRO islands(t) AS TABLE
    SELECT r.*, i.island FROM query_table(t) r JOIN (
        SELECT k, lo, hi, sum(CASE WHEN before IS NULL OR lo >= before THEN 1 ELSE 0 END)
                              OVER (PARTITION BY k ORDER BY lo, hi ROWS UNBOUNDED PRECEDING) AS island
        FROM (SELECT k, lo, hi, max(hi) OVER (PARTITION BY k ORDER BY lo, hi
                                              ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
              FROM (SELECT DISTINCT k, lo, hi FROM query_table(t)))) i
    ON r.k = i.k AND r.lo = i.lo AND r.hi = i.hi;
CREATE OR REPLACE TEMP MACRO covered(t) AS TABLE
    SELECT k, sum(greatest(hi - greatest(lo, coalesce(before, lo)), 0))::BIGINT AS covered
    FROM (SELECT k, lo, hi, max(hi) OVER (PARTITION BY k ORDER BY lo, hi
                                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
          FROM query_table(t))
    GROUP BY k;
"""
