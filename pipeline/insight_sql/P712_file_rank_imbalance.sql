-- family: client
-- title: ranks moving very different amounts of data to a file only some of them access
-- thresholds: size_imbalance
-- columns: calls.rank, calls.file, calls.bytes, calls.func
-- Drishti's P21 (writes) and P22 (reads) on the files Darshan would keep per rank, not reduced to one
-- shared record: those that several ranks, but not all of the run's, access.  Per file and direction,
-- the most and the fewest bytes a rank that moved any moved; high when they differ by more than
-- size_imbalance of the most.  (A file every rank accesses: P705, Drishti's P18.)
WITH per_rank AS (
    SELECT file, direction, rank, coalesce(sum(bytes), 0)::BIGINT AS bytes FROM data_calls
    WHERE file IS NOT NULL GROUP BY ALL
), partial AS (  -- files several ranks, but not all, access
    SELECT file FROM data_calls GROUP BY file
    HAVING count(DISTINCT rank) > 1 AND count(DISTINCT rank) < (SELECT count(DISTINCT rank) FROM calls)
), f AS (
    SELECT p.file, p.direction, max(p.bytes) AS most, min(p.bytes) AS fewest, arg_max(p.rank, p.bytes) AS top_rank,
           count(*) AS ranks
    FROM per_rank p SEMI JOIN partial USING (file) GROUP BY ALL
), flagged AS (
    SELECT *, (most - fewest) / most AS imbalance FROM f
    WHERE most > 0 AND (most - fewest) / most > getvariable('size_imbalance')
)
SELECT 'high' AS severity, CASE direction WHEN 'read' THEN 'P22' ELSE 'P21' END AS drishti,
       printf('%s imbalance on %d file(s) accessed by some of the ranks: up to %s between the rank that %s the '
              || 'most (%s on %s) and the one that %s the fewest bytes', direction, count(*), fmt_pct(max(imbalance)),
              CASE direction WHEN 'read' THEN 'read' ELSE 'wrote' END,
              format_bytes(arg_max(most, imbalance)::BIGINT), arg_max(file, imbalance),
              CASE direction WHEN 'read' THEN 'read' ELSE 'wrote' END) AS detail,
       'balance the ' || direction || 's over the ranks (or over the aggregators with collective calls)'
           AS recommendation,
'/* one collective call: ROMIO spreads the bytes over cb_nodes aggregators */
MPI_Info_set(info, "cb_nodes", "8");
MPI_File_open(comm, path, amode, info, &fh);' AS example,
       {'direction': direction, 'files': count(*), 'max_imbalance_share': round(max(imbalance), 4)} AS numbers,
       list(DISTINCT top_rank ORDER BY top_rank) AS ranks, []::UBIGINT[] AS callids,
       list(file ORDER BY imbalance DESC, file) AS files, []::VARCHAR[] AS servers
FROM flagged GROUP BY direction
ORDER BY direction
