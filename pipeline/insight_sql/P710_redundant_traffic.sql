-- family: client
-- title: bytes read or written more than once (redundant traffic)
-- thresholds: redundant_share, redundant_high_share
-- columns: calls.func, calls.file, calls.file_offset, calls.size, calls.region_offsets, calls.region_lengths, calls.rank
-- needs: accesses
-- Drishti's P09/P10 counted exactly: per direction, the bytes moved against the union of the byte ranges
-- of the data calls in each file (every region of a non-contiguous call; one sweep by offset, as the
-- macro covered); redundant = moved - union: bytes read (written) again, by the same rank or another.
-- What moved is counted as the file system sees it: a collective call whose data went through
-- aggregators (its I/O cycles, as ROMIO's collective buffering) moved the union of its ranks' ranges once
-- (every rank reading the whole file in one collective read is one read of it); an independent call, or
-- a collective without cycles, its own ranges.  High when the redundant bytes are more than
-- redundant_high_share of the bytes moved (most of it moved more than once), warning when more than
-- redundant_share, info below.  Ranks, calls and files: those of the ranges that overlap a range of
-- another call (or collective): each rank moving the same bytes, the first included.
WITH cycled AS (  -- the collectives whose data went through aggregators
    SELECT DISTINCT k.coll_seq FROM phases p JOIN calls k ON k.callid = p.callid
    WHERE p.phase = 'io' AND k.coll_seq IS NOT NULL
), c AS (  -- the data calls; unit: an aggregated collective (-1 - its number) or the call (its row)
    SELECT d.direction, d.file, d.callid, d.rank, d.file_offset, d.size, d.region_offsets, d.region_lengths,
           CASE WHEN y.coll_seq IS NOT NULL THEN -1 - d.coll_seq ELSE row_number() OVER () END AS unit
    FROM data_calls d LEFT JOIN cycled y ON y.coll_seq = d.coll_seq AND d.collective
    WHERE d.file IS NOT NULL AND d.file_offset IS NOT NULL
), files AS (  -- (direction, file) numbered: the sweeps' keys
    SELECT direction, file, row_number() OVER () AS k FROM (SELECT DISTINCT direction, file FROM c)
), ranges AS MATERIALIZED (
    SELECT f.k, r.unit, r.callid, r.rank, r.lo, r.lo + r.len AS hi FROM (
        SELECT direction, file, unit, callid, rank,
               unnest(CASE WHEN len(coalesce(region_offsets, [])) > 0 THEN region_offsets ELSE [file_offset] END)
                   AS lo,
               unnest(CASE WHEN len(coalesce(region_offsets, [])) > 0 THEN region_lengths ELSE [size] END) AS len
        FROM c) r JOIN files f USING (direction, file)
    WHERE r.len > 0
), multi AS (  -- the units of several ranges: what they moved is their union (one range: its length)
    SELECT {'k': k, 'u': unit} AS k, lo, hi FROM ranges
    WHERE (k, unit) IN (SELECT (k, unit) FROM ranges GROUP BY k, unit HAVING count(*) > 1)
), again AS (  -- per file: the bytes of a unit's ranges that its own other ranges cover too
    SELECT k, sum(len - covered)::BIGINT AS own FROM (
        SELECT m.k.k AS k, m.covered, s.len FROM covered('multi') m
        JOIN (SELECT {'k': k, 'u': unit} AS ku, sum(hi - lo) AS len FROM ranges GROUP BY ALL) s ON s.ku = m.k)
    GROUP BY k
), per_file AS (
    SELECT f.direction, f.file, (t.len - coalesce(a.own, 0))::BIGINT AS moved, u.covered AS unique_bytes
    FROM covered('ranges') u JOIN files f USING (k)
    JOIN (SELECT k, sum(hi - lo) AS len FROM ranges GROUP BY k) t USING (k) LEFT JOIN again a USING (k)
), redundant_ranges AS (
    SELECT r.* FROM ranges r JOIN files f USING (k) SEMI JOIN per_file p
        ON p.direction = f.direction AND p.file = f.file AND p.moved > p.unique_bytes
), shared AS (  -- the ranges of the files moved more than once in an island of more than one call's ranges
    SELECT f.direction, f.file, i.callid, i.rank, i.hi - i.lo AS bytes
    FROM (SELECT *, min(unit) OVER w <> max(unit) OVER w AS others  -- (more than one unit in it)
          FROM islands('redundant_ranges') WINDOW w AS (PARTITION BY k, island)) i
    JOIN files f USING (k) WHERE i.others
), d AS (
    SELECT direction, sum(moved)::BIGINT AS moved, sum(unique_bytes)::BIGINT AS unique_bytes,
           sum(moved - unique_bytes)::BIGINT AS redundant,
           list(file ORDER BY moved - unique_bytes DESC, file) FILTER (WHERE moved > unique_bytes) AS files
    FROM per_file GROUP BY direction HAVING sum(moved) > sum(unique_bytes)
), who AS (
    SELECT direction, list(rank ORDER BY b DESC, rank) AS ranks
    FROM (SELECT direction, rank, sum(bytes) AS b FROM shared GROUP BY ALL) GROUP BY direction
), calls_of AS (
    SELECT direction, list(callid ORDER BY b DESC, callid) AS callids, count(*) AS calls
    FROM (SELECT direction, callid, sum(bytes) AS b FROM shared WHERE callid IS NOT NULL GROUP BY ALL)
    GROUP BY direction
)
SELECT CASE WHEN redundant > getvariable('redundant_high_share') * moved THEN 'high'
            WHEN redundant > getvariable('redundant_share') * moved THEN 'warning' ELSE 'info' END AS severity,
       CASE direction WHEN 'read' THEN 'P09' ELSE 'P10' END AS drishti,
       printf('%s of the %s %s (%s) were %s before or at once by the same or another rank: %s %s once, '
              || 'in %d file(s); %d calls overlap others', format_bytes(redundant), format_bytes(moved),
              CASE direction WHEN 'read' THEN 'read' ELSE 'written' END, fmt_pct(redundant / moved),
              CASE direction WHEN 'read' THEN 'read' ELSE 'written' END, format_bytes(unique_bytes),
              CASE direction WHEN 'read' THEN 'read' ELSE 'written' END, len(files), coalesce(c.calls, 0))
           AS detail,
       CASE WHEN redundant <= getvariable('redundant_share') * moved THEN NULL
            WHEN direction = 'read'
            THEN 'read each part once and share it (one rank reads, then MPI_Bcast), or read collectively '
                 || '(MPI_File_read_all: the aggregators read each byte once), or keep it in memory between phases'
            ELSE 'write each part once: merge the rewrites in memory and write the final data; a checkpoint '
                 || 'rewritten in place each step can go to a new file per step (or only the last kept)' END
           AS recommendation,
       CASE WHEN redundant <= getvariable('redundant_share') * moved THEN NULL
            WHEN direction = 'read' THEN
'/* one rank reads what every rank needs, then broadcasts it */
if (rank == 0) MPI_File_read_at(fh, 0, buf, n, MPI_BYTE, MPI_STATUS_IGNORE);
MPI_Bcast(buf, n, MPI_BYTE, 0, comm);'
            ELSE
'/* which calls write the same bytes: the calls of this finding, and their disk operations */
callid sql merged.duckdb "SELECT callid_hex, rank, file_offset, size FROM calls WHERE func LIKE ''%write%'' ORDER BY file, file_offset"' END
           AS example,
       {'direction': direction, 'moved_bytes': moved, 'unique_bytes': unique_bytes, 'redundant_bytes': redundant,
        'redundant_share': round(redundant / moved, 4)} AS numbers,
       coalesce(w.ranks, []) AS ranks, coalesce(c.callids, []) AS callids, files, []::VARCHAR[] AS servers
FROM d LEFT JOIN who w USING (direction) LEFT JOIN calls_of c USING (direction)
ORDER BY direction
