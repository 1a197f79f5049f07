"""A Darshan log's two DXT layers: which POSIX operations each MPI-IO call caused in the job, and how
the job really aggregated.

ROMIO turns an independent MPI-IO call into POSIX operations of its own rank, and a collective call
(two-phase I/O) into POSIX operations of its aggregators only, in pieces of at most
``cb_buffer_size`` bytes.  A DXT_POSIX segment is taken as caused by

- a collective call when it is of the same file and direction, starts inside the call's window (its
  ranks' first start to last end) and lies inside the call's file range (their lowest offset to
  highest end): it served each rank's part it overlaps;
- an independent call when it is also of the call's rank and starts inside the call's own window.

:func:`links` gives these cross-layer arrows (``exact``: the segment fits one call's window only;
where windows overlap it is linked to each, not exact); :func:`infer` the job's aggregators and
largest piece per file and direction, where the linked segments cover at least :data:`COVERED` of
the collective calls' bytes (else the POSIX layer does not show the collective I/O).
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

__all__ = ["COVERED", "infer", "links"]

#: the least share of the collective calls' bytes the linked POSIX segments must hold
COVERED = 0.5

#: each POSIX segment with every call window it fits (``acc``: the MPI-IO accesses, ``coll`` set for
#: collective ones; ``posix``: the DXT_POSIX segments of the same files)
_LINKED = """
WITH windows AS (
    SELECT file, io, coll, CASE WHEN coll IS NULL THEN any_value(row) END AS only_row,
           CASE WHEN coll IS NULL THEN any_value(rank) END AS only_rank, min(t_start) AS lo, max(t_end) AS hi,
           min("offset") AS first, max("offset" + length) AS last, sum(length) AS bytes
    FROM acc GROUP BY file, io, coll, CASE WHEN coll IS NULL THEN row END
), seg AS (SELECT row_number() OVER () AS seg, * FROM posix), fits AS (
    SELECT p.*, w.coll, w.only_row
    FROM seg p JOIN windows w ON p.file = w.file AND p.io = w.io AND w.coll IS NOT NULL
                             AND p.t_start BETWEEN w.lo AND w.hi AND p."offset" >= w.first
                             AND p."offset" + p.length <= w.last
    UNION ALL  -- (by rank: a hash join, not an inequality join over all the file's calls)
    SELECT p.*, w.coll, w.only_row
    FROM seg p JOIN windows w ON p.file = w.file AND p.io = w.io AND p.rank = w.only_rank
                             AND p.t_start BETWEEN w.lo AND w.hi AND p."offset" >= w.first
                             AND p."offset" + p.length <= w.last
), linked AS (SELECT *, count(*) OVER (PARTITION BY seg) AS windows FROM fits)
"""

# (a collective window's segments meet its ranks' accesses by call, an independent one's its access: two
# equality joins, then the overlap)
_LINKS = _LINKED + """, pairs AS (
    SELECT l.*, a.row, a."offset" AS a_offset, a.length AS a_length
    FROM linked l JOIN acc a ON a.file = l.file AND a.io = l.io AND a.coll = l.coll
    UNION ALL
    SELECT l.*, a.row, a."offset", a.length FROM linked l JOIN acc a ON a.row = l.only_row
)
SELECT row, rank, "offset", length, t_start, t_end, windows = 1 AS exact,
       least(a_offset + a_length, "offset" + length) - greatest(a_offset, "offset") AS bytes
FROM pairs WHERE a_offset < "offset" + length AND "offset" < a_offset + a_length
ORDER BY row, t_start
"""

_INFER = _LINKED + """, totals AS (
    SELECT file, io, sum(bytes)::BIGINT AS collective_bytes, count(*) AS calls
    FROM windows WHERE coll IS NOT NULL GROUP BY ALL
)
SELECT l.file, l.io, list(DISTINCT l.rank ORDER BY l.rank) AS aggregators, max(l.length) AS max_piece,
       count(*) AS pieces, sum(l.length)::BIGINT AS bytes, any_value(t.collective_bytes) AS collective_bytes,
       any_value(t.calls) AS calls
FROM linked l JOIN totals t USING (file, io)
WHERE l.coll IS NOT NULL
GROUP BY l.file, l.io
HAVING sum(l.length) >= $covered * any_value(t.collective_bytes)
ORDER BY l.file, l.io
"""


def _connect(acc: pa.Table, posix: pa.Table) -> duckdb.DuckDBPyConnection:
    """A connection holding ``acc`` (with its row numbers) and ``posix``."""
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    con.register("acc", acc.select(["rank", "file", "io", "coll", "offset", "length", "t_start", "t_end"])
                 .append_column("row", pa.array(range(acc.num_rows), pa.int64())))
    con.register("posix", posix.select(["rank", "file", "io", "offset", "length", "t_start", "t_end"]))
    return con


def links(acc: pa.Table, posix: pa.Table) -> pa.Table:
    """One row per (MPI-IO access, POSIX segment it caused): ``row`` (the access's index in ``acc``),
    the segment's rank, offset, length, t_start, t_end, the access's ``bytes`` in it and ``exact``."""
    con = _connect(acc, posix)
    try:
        return con.sql(_LINKS).to_arrow_table()
    finally:
        con.close()


def infer(acc: pa.Table, posix: pa.Table) -> list[dict]:
    """Per file and direction whose collective calls the POSIX segments show: file, io, aggregators
    (ranks), max_piece, pieces, bytes (theirs), collective_bytes, calls (collective)."""
    con = _connect(acc, posix)
    try:
        cur = con.execute(_INFER, {"covered": COVERED})
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]
    finally:
        con.close()
