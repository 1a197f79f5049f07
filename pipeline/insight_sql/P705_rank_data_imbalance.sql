-- family: client
-- title: ranks moving very different amounts of data to a shared file
-- thresholds: rank_imbalance
-- columns: calls.rank, calls.file, calls.bytes, calls.dur_ns
-- Drishti's P18 per shared file (one that several ranks access): the bytes of the rank with the
-- most I/O time against those of the rank with the least; high when they differ by more than
-- rank_imbalance of the file's bytes.
WITH per_rank AS (
    SELECT file, rank, coalesce(sum(bytes), 0)::BIGINT AS bytes, sum(dur_ns)::BIGINT AS io_ns
    FROM data_calls GROUP BY file, rank
), f AS (
    SELECT file, count(*) AS ranks, sum(bytes)::BIGINT AS total,
           arg_max(rank, (io_ns, -rank)) AS slowest, arg_max(bytes, (io_ns, -rank)) AS slowest_bytes,
           arg_min(rank, (io_ns, rank)) AS fastest, arg_min(bytes, (io_ns, rank)) AS fastest_bytes,
           max(bytes) AS max_bytes, min(bytes) AS min_bytes
    FROM per_rank GROUP BY file HAVING count(*) > 1 AND sum(bytes) > 0
)
SELECT 'high' AS severity,
       'P18' AS drishti,
       printf('%s: the slowest rank %d moved %s, the fastest rank %d %s: %s of the file''s %s (%d ranks)',
              file, slowest, format_bytes(slowest_bytes), fastest, format_bytes(fastest_bytes),
              fmt_pct(abs(slowest_bytes - fastest_bytes) / total), format_bytes(total), ranks) AS detail,
       'balance the data between the ranks; if the layout makes some ranks slow, change striping_factor and '
       || 'striping_unit (callid insights S801 shows the servers)' AS recommendation,
       {'ranks': ranks, 'file_bytes': total, 'slowest_rank': slowest, 'slowest_rank_bytes': slowest_bytes,
        'fastest_rank': fastest, 'fastest_rank_bytes': fastest_bytes, 'max_rank_bytes': max_bytes,
        'min_rank_bytes': min_bytes,
        'imbalance_share': round(abs(slowest_bytes - fastest_bytes) / total, 4)} AS numbers,
       [slowest, fastest] AS ranks, []::UBIGINT[] AS callids, [file] AS files, []::VARCHAR[] AS servers
FROM f
WHERE abs(slowest_bytes - fastest_bytes) > getvariable('rank_imbalance') * total
ORDER BY abs(slowest_bytes - fastest_bytes) / total DESC, file
