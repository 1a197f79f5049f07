"""The job's real collective buffering, read from the DXT_POSIX segments under its collective MPI-IO calls.

ROMIO's two-phase I/O turns a collective call into POSIX reads and writes issued by its
aggregators only, in pieces of at most ``cb_buffer_size`` bytes.  A Darshan log with both DXT layers
shows them: a POSIX segment of the same file and direction that starts inside a collective call's
window (its ranks' first start to last end) and lies inside the call's file range (its ranks' lowest
offset to highest end) was issued for that call.  Per file and direction this gives the ranks that
aggregated and the largest piece (the buffer size, when any cycle was full).  It is taken as the
job's aggregation only where such segments cover at least :data:`COVERED` of the collective calls'
bytes (else the POSIX layer does not show the collective I/O, e.g. DXT_POSIX was off for it).
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

__all__ = ["COVERED", "infer"]

#: the least share of the collective calls' bytes the linked POSIX segments must hold
COVERED = 0.5

_SQL = """
WITH calls AS (
    SELECT file, io, coll, min(t_start) AS lo, max(t_end) AS hi, min("offset") AS first,
           max("offset" + length) AS last, sum(length) AS bytes
    FROM acc WHERE coll IS NOT NULL GROUP BY file, io, coll
), linked AS (
    SELECT c.file, c.io, c.coll, p.rank, p.length
    FROM posix p JOIN calls c ON p.file = c.file AND p.io = c.io AND p.t_start BETWEEN c.lo AND c.hi
                              AND p."offset" >= c.first AND p."offset" + p.length <= c.last
), totals AS (
    SELECT file, io, sum(bytes)::BIGINT AS collective_bytes, count(*) AS calls FROM calls GROUP BY ALL
)
SELECT l.file, l.io, list(DISTINCT l.rank ORDER BY l.rank) AS aggregators, max(l.length) AS max_piece,
       count(*) AS pieces, sum(l.length)::BIGINT AS bytes, any_value(t.collective_bytes) AS collective_bytes,
       any_value(t.calls) AS calls
FROM linked l JOIN totals t USING (file, io)
GROUP BY l.file, l.io
HAVING sum(l.length) >= $covered * any_value(t.collective_bytes)
ORDER BY l.file, l.io
"""


def infer(acc: pa.Table, posix: pa.Table) -> list[dict]:
    """Per file and direction whose collective calls (``acc``: the MPI-IO accesses, ``coll`` set for
    collective ones) the POSIX segments (``posix``) show: file, io, aggregators (ranks), max_piece,
    pieces, bytes (theirs), collective_bytes, calls (collective)."""
    con = duckdb.connect()
    try:
        con.register("acc", acc.select(["file", "io", "coll", "offset", "length", "t_start", "t_end"]))
        con.register("posix", posix.select(["rank", "file", "io", "offset", "length", "t_start"]))
        cur = con.execute(_SQL, {"covered": COVERED})
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]
    finally:
        con.close()
