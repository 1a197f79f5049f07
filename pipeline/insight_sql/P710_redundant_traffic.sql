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
), ranges AS (
    SELECT {'d': direction, 'f': file} AS k, {'d': direction, 'f': file, 'u': unit} AS ku, *, lo + len AS hi FROM (
        SELECT c.direction, c.file, c.callid, c.rank,
               CASE WHEN y.coll_seq IS NOT NULL THEN 'c' || c.coll_seq ELSE 'i' || c.n END AS unit,
               unnest(CASE WHEN len(coalesce(c.region_offsets, [])) > 0 THEN c.region_offsets
                           ELSE [c.file_offset] END) AS lo,
               unnest(CASE WHEN len(coalesce(c.region_offsets, [])) > 0 THEN c.region_lengths ELSE [c.size] END)
                   AS len
        FROM (SELECT *, row_number() OVER () AS n FROM data_calls
              WHERE file IS NOT NULL AND file_offset IS NOT NULL) c
        LEFT JOIN cycled y ON y.coll_seq = c.coll_seq AND c.collective)
    WHERE len > 0
), by_unit AS (SELECT ku AS k, lo, hi FROM ranges
), moved AS (  -- per file: what each call (or aggregated collective) moved, the union of its ranges, summed
    SELECT k.d AS direction, k.f AS file, sum(covered)::BIGINT AS moved FROM covered('by_unit') GROUP BY ALL
), per_file AS (
    SELECT u.k.d AS direction, u.k.f AS file, m.moved, u.covered AS unique_bytes
    FROM covered('ranges') u JOIN moved m ON m.direction = u.k.d AND m.file = u.k.f
), shared AS (  -- the ranges in an island of ranges of more than one call (or collective)
    SELECT direction, file, callid, rank, hi - lo AS bytes
    FROM (SELECT *, count(DISTINCT unit) OVER (PARTITION BY k, island) AS n FROM islands('ranges')) WHERE n > 1
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
