-- family: client
-- title: random access rather than sequential or consecutive
-- thresholds: random_share, random_count
-- columns: calls.rank, calls.file, calls.file_offset, calls.size, calls.t_start
-- Darshan's counters, per rank and file in call order: consecutive (starts where the previous
-- access ended), sequential (starts after the previous one's start; includes consecutive; a
-- rank's first access to a file counts as sequential), random (the rest).  Drishti's P11/P13: high
-- when random accesses are more than random_share and more than random_count; otherwise ok.
WITH d AS (
    SELECT direction, rank, file, callid, t_start, file_offset,
           lag(file_offset) OVER w AS prev_offset, lag(file_offset + size) OVER w AS prev_end
    FROM data_calls WHERE file_offset IS NOT NULL
    WINDOW w AS (PARTITION BY rank, file, direction ORDER BY t_start, callid)
), k AS (
    SELECT *, prev_offset IS NULL OR file_offset > prev_offset AS sequential,
           prev_end IS NOT NULL AND file_offset = prev_end AS consecutive
    FROM d
), totals AS (
    SELECT direction, count(*) AS requests, count(*) FILTER (WHERE sequential) AS sequential,
           count(*) FILTER (WHERE consecutive) AS consecutive, count(*) FILTER (WHERE NOT sequential) AS random
    FROM k GROUP BY direction
), flagged AS (
    SELECT *, random > getvariable('random_share') * requests AND random > getvariable('random_count') AS high
    FROM totals
)
SELECT CASE WHEN high THEN 'high' ELSE 'ok' END AS severity,
       CASE direction WHEN 'read' THEN CASE WHEN high THEN 'P11' ELSE 'P12' END
                      ELSE CASE WHEN high THEN 'P13' ELSE 'P14' END END AS drishti,
       printf('%s: %d requests, %s random, %s sequential, %s consecutive', direction, requests,
              fmt_pct(random / requests), fmt_pct(sequential / requests), fmt_pct(consecutive / requests))
           AS detail,
       CASE WHEN high THEN 'access the file in increasing offsets (sort the requests, or describe them with a '
                           || 'file view and one collective call)' END AS recommendation,
       {'direction': direction, 'requests': requests, 'random': random, 'sequential': sequential,
        'consecutive': consecutive, 'random_share': round(random / requests, 4)} AS numbers,
       CASE WHEN high THEN (SELECT list(rank ORDER BY n DESC, rank) FROM (
            SELECT rank, count(*) AS n FROM k WHERE k.direction = f.direction AND NOT sequential GROUP BY rank))
            ELSE [] END AS ranks,
       CASE WHEN high THEN (SELECT list(callid ORDER BY t_start) FROM k
                            WHERE k.direction = f.direction AND NOT sequential AND callid IS NOT NULL)
            ELSE [] END AS callids,
       CASE WHEN high THEN (SELECT list(file ORDER BY n DESC, file) FROM (
            SELECT file, count(*) AS n FROM k WHERE k.direction = f.direction AND NOT sequential GROUP BY file))
            ELSE [] END AS files,
       []::VARCHAR[] AS servers
FROM flagged f
ORDER BY direction
