-- family: client
-- title: late ranks: a rank the others wait for at collective calls
-- thresholds: late_rank_share
-- columns: calls.rank, calls.coll_seq, calls.collective, calls.t_start, calls.t_end
-- needs: pace
-- At each collective call the ranks that came first wait for the last one (its arrival less theirs).  Per
-- rank: the time the others waited for it, over the collectives it came to last.  High when it came last
-- to more than half of the collective calls (at least 2: a pattern, not the start-up of the processes or one
-- chance delay) and the others waited at least late_rank_share of the time of all collective calls (and
-- 10 ms): the rank comes late (its computation, its node, its own I/O before), and the others' collective
-- calls look slow for it, which P706 counts against them.  One row per late rank.
WITH arrivals AS (
    SELECT coll_seq, rank, t_start, max(t_start) OVER w AS last, arg_max(rank, t_start) OVER w AS last_rank
    FROM calls WHERE collective AND coll_seq IS NOT NULL
    WINDOW w AS (PARTITION BY coll_seq)
), waited AS (  -- per collective: who came last, and how long the others waited for it
    SELECT coll_seq, any_value(last_rank) AS rank, sum(last - t_start)::BIGINT AS ns, count(*) - 1 AS others
    FROM arrivals GROUP BY coll_seq HAVING count(*) > 1
), per_rank AS (
    SELECT rank, count(*) AS collectives, sum(ns)::BIGINT AS ns, max(others) AS others FROM waited GROUP BY rank
), total AS (
    SELECT coalesce(sum(t_end - t_start), 0)::BIGINT AS ns, count(DISTINCT coll_seq) AS collectives
    FROM calls WHERE collective AND coll_seq IS NOT NULL
), late AS (
    SELECT p.*, t.ns AS total_ns, t.collectives AS all_collectives FROM per_rank p, total t
    WHERE p.ns >= greatest(getvariable('late_rank_share') * t.ns, 10e6)
      AND p.collectives >= 2 AND p.collectives > t.collectives / 2
)
SELECT 'high' AS severity,
       printf('rank %d came last to %d of the %d collective calls: the other ranks waited %s for it, %s of the '
              || '%s of all collective calls', rank, collectives, all_collectives, fmt_ns(ns),
              fmt_pct(ns / total_ns), fmt_ns(total_ns)) AS detail,
       printf('find what makes rank %d late (its computation, its node, its I/O before the collectives): '
              || 'balance the work before the collectives; where the ranks need not meet, independent or '
              || 'non-blocking collective calls (MPI_File_iwrite_all) let the others go on', rank)
           AS recommendation,
       {'rank': rank, 'collectives': collectives, 'waited_ns': ns, 'share': round(ns / total_ns, 4)} AS numbers,
       [rank] AS ranks, []::UBIGINT[] AS callids, []::VARCHAR[] AS files, []::VARCHAR[] AS servers
FROM late
ORDER BY ns DESC, rank
