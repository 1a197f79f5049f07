-- family: client
-- title: stragglers: ranks spending very different time on I/O to a shared file
-- thresholds: rank_imbalance, noise_ns
-- columns: calls.rank, calls.file, calls.dur_ns, calls.coll_seq, calls.collective, calls.t_start
-- needs: pace
-- Drishti's P19 per shared file: the I/O time of the slowest and the fastest rank (the time of
-- their data calls, less what a rank waited at a collective call for the last rank to arrive: a late
-- rank makes the others look slow, and P716 names it; Drishti's counters cannot tell the two apart);
-- high when they differ by more than rank_imbalance of all ranks' time on it, and by noise_ns at least
-- (callid's floor: Drishti has none, and flags a short run's scheduling noise).
WITH arrived AS (
    SELECT coll_seq, max(t_start) AS last FROM calls WHERE collective AND coll_seq IS NOT NULL GROUP BY coll_seq
), per_rank AS (
    SELECT d.file, d.rank,
           sum(d.dur_ns - CASE WHEN d.collective THEN greatest(0, least(d.t_end, a.last) - d.t_start) ELSE 0 END)
               ::BIGINT AS io_ns
    FROM data_calls d LEFT JOIN arrived a USING (coll_seq) GROUP BY d.file, d.rank
), f AS (
    SELECT file, count(*) AS ranks, sum(io_ns)::BIGINT AS total,
           arg_max(rank, (io_ns, -rank)) AS slowest, max(io_ns) AS slowest_ns,
           arg_min(rank, (io_ns, rank)) AS fastest, min(io_ns) AS fastest_ns
    FROM per_rank GROUP BY file HAVING count(*) > 1 AND sum(io_ns) > 0
)
SELECT 'high' AS severity,
       'P19' AS drishti,
       printf('%s: rank %d spent %s in I/O, rank %d %s: %s of the %d ranks'' %s', file, slowest,
              fmt_ns(slowest_ns), fastest, fmt_ns(fastest_ns), fmt_pct((slowest_ns - fastest_ns) / total),
              ranks, fmt_ns(total)) AS detail,
       'find why the slow rank is slow: callid insights S810 names the server and disk operation behind '
       || 'stragglers; balance the data or the layout (striping_factor, striping_unit)' AS recommendation,
       {'ranks': ranks, 'total_ns': total, 'slowest_rank': slowest, 'slowest_ns': slowest_ns,
        'fastest_rank': fastest, 'fastest_ns': fastest_ns,
        'imbalance_share': round((slowest_ns - fastest_ns) / total, 4),
        'impact': round((slowest_ns - fastest_ns) / total, 4)} AS numbers,
       [slowest, fastest] AS ranks, []::UBIGINT[] AS callids, [file] AS files, []::VARCHAR[] AS servers
FROM f
WHERE slowest_ns - fastest_ns > greatest(getvariable('rank_imbalance') * total, getvariable('noise_ns'))
ORDER BY (slowest_ns - fastest_ns) / total DESC, file
