-- family: client
-- title: ranks moving very different amounts of data to the same file (per-rank records)
-- thresholds: size_imbalance
-- drishti: P21, P22
-- columns: posix (per-rank records, rank >= 0).POSIX_BYTES_WRITTEN, POSIX_BYTES_READ
-- Drishti's P21 (writes) and P22 (reads) per file that Darshan kept per rank (not reduced to one shared
-- record): the most and the fewest bytes a rank moved; high when they differ by more than size_imbalance
-- of the most.  A file one rank alone accessed has nothing to differ from.
WITH f AS (
    SELECT d.direction, d.k, file,
           max(CASE d.k WHEN 0 THEN POSIX_BYTES_READ ELSE POSIX_BYTES_WRITTEN END) AS most,
           min(CASE d.k WHEN 0 THEN POSIX_BYTES_READ ELSE POSIX_BYTES_WRITTEN END) AS fewest,
           arg_max(rank, CASE d.k WHEN 0 THEN POSIX_BYTES_READ ELSE POSIX_BYTES_WRITTEN END) AS top_rank
    FROM posix, directions d WHERE rank >= 0 GROUP BY ALL
), flagged AS (
    SELECT *, (most - fewest) / most AS imbalance FROM f
    WHERE most > 0 AND (most - fewest) / most > getvariable('size_imbalance')
)
SELECT 'high' AS severity, CASE k WHEN 0 THEN 'P22' ELSE 'P21' END AS drishti,
       printf('%s imbalance on %d file(s) accessed by several ranks: up to %s between the rank that %s the most '
              'and the one that %s the fewest bytes (%s on %s)', direction, count(*), fmt_pct(max(imbalance)),
              CASE k WHEN 0 THEN 'read' ELSE 'wrote' END, CASE k WHEN 0 THEN 'read' ELSE 'wrote' END,
              format_bytes(arg_max(most, imbalance)::BIGINT), arg_max(file, imbalance)) AS detail,
       'balance the ' || direction || 's over the ranks (or over the aggregators with collective calls)'
           AS recommendation,
'/* one collective call: ROMIO spreads the bytes over cb_nodes aggregators */
MPI_Info_set(info, "cb_nodes", "8");
MPI_File_open(comm, path, amode, info, &fh);' AS example,
       {'direction': direction, 'files': count(*), 'max_imbalance_share': round(max(imbalance), 4)} AS numbers,
       list(DISTINCT top_rank) AS ranks, []::UBIGINT[] AS callids,
       list(file ORDER BY imbalance DESC, file) AS files, []::VARCHAR[] AS servers
FROM flagged GROUP BY k, direction
ORDER BY k DESC
