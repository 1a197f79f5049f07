-- family: faults
-- title: late ranks: a rank the others wait for at collective calls
-- thresholds: late_rank_share, noise_ns
-- columns: calls.rank, calls.coll_seq, calls.collective, calls.t_start, calls.t_end, mpi_calls.rank, mpi_calls.t_start, mpi_calls.t_end
-- needs: pace
-- At each collective call the ranks that came first wait for the last one.  What they wait for the rank's
-- own time is what it spent outside MPI since its previous MPI call (its gap: computation, its node) beyond
-- theirs: for each other rank, the least of its wait and the late rank's gap less its own (a rank late
-- because its previous I/O call took long is not late by its own doing: that is the I/O's, which other
-- insights see).  A rank's first MPI call has no gap (the processes start at different times): left out.
-- Per rank: that time, over the collectives it came to last.  High when it came last, so, to more than half
-- of the collective calls (at least 2: a pattern, not one chance delay) and the others waited at least
-- late_rank_share of the time of all collective calls, and noise_ns: the others' collective calls look
-- slow for it, which P706 would count against them.  One row per late rank.
WITH mpi AS (  -- each rank's MPI calls, I/O and collectives without I/O, with the time since its previous one
    SELECT rank, coll_seq, collective, t_start, t_end,
           t_start - lag(t_end) OVER (PARTITION BY rank ORDER BY t_start, t_end) AS gap
    FROM (SELECT rank, coll_seq, collective, t_start, t_end FROM calls
          UNION ALL SELECT rank, NULL, false, t_start, t_end FROM mpi_calls)
), colls AS (
    SELECT * FROM mpi WHERE collective AND coll_seq IS NOT NULL AND gap IS NOT NULL
), arrivals AS (
    SELECT coll_seq, rank, t_start, greatest(gap, 0) AS gap, max(t_start) OVER w AS last,
           arg_max(rank, t_start) OVER w AS last_rank, arg_max(greatest(gap, 0), t_start) OVER w AS last_gap
    FROM colls WINDOW w AS (PARTITION BY coll_seq)
), waited AS (  -- per collective: who came last, and how long the others waited for its own time
    SELECT coll_seq, any_value(last_rank) AS rank,
           sum(least(last - t_start, greatest(0, last_gap - gap))) FILTER (WHERE rank <> last_rank)::BIGINT AS ns
    FROM arrivals GROUP BY coll_seq HAVING count(*) > 1
), per_rank AS (
    SELECT rank, count(*) AS collectives, sum(ns)::BIGINT AS ns FROM waited WHERE ns > 0 GROUP BY rank
), total AS (
    SELECT coalesce(sum(t_end - t_start), 0)::BIGINT AS ns, count(DISTINCT coll_seq) AS collectives FROM colls
), late AS (
    SELECT p.*, t.ns AS total_ns, t.collectives AS all_collectives FROM per_rank p, total t
    WHERE p.ns >= greatest(getvariable('late_rank_share') * t.ns, getvariable('noise_ns'))
      AND p.collectives >= 2 AND p.collectives > t.collectives / 2
)
SELECT 'high' AS severity,
       printf('rank %d came last to %d of the %d collective calls, late by its own time outside MPI: the other '
              || 'ranks waited %s for it, %s of the %s of all collective calls', rank, collectives,
              all_collectives, fmt_ns(ns), fmt_pct(ns / total_ns), fmt_ns(total_ns)) AS detail,
       printf('find what makes rank %d late (its computation, its node): balance the work before the '
              || 'collectives; where the ranks need not meet, independent or non-blocking collective calls '
              || '(MPI_File_iwrite_all) let the others go on', rank) AS recommendation,
       {'rank': rank, 'collectives': collectives, 'waited_ns': ns, 'share': round(ns / total_ns, 4),
        'impact': round(ns / total_ns, 4)} AS numbers,
       [rank] AS ranks, []::UBIGINT[] AS callids, []::VARCHAR[] AS files, []::VARCHAR[] AS servers
FROM late
ORDER BY ns DESC, rank
