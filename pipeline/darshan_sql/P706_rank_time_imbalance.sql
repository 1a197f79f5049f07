-- family: client
-- title: stragglers: ranks spending very different time on I/O to a shared file
-- thresholds: rank_imbalance
-- drishti: P19
-- columns: posix (shared records, rank -1).POSIX_F_SLOWEST_RANK_TIME, POSIX_F_FASTEST_RANK_TIME, POSIX_F_*_TIME
-- Drishti's P19 per shared file: the I/O time of its slowest and fastest rank; high when they differ by
-- more than rank_imbalance of the time all ranks spent on it (read, write and metadata).
WITH f AS (
    SELECT file, POSIX_SLOWEST_RANK AS slowest, POSIX_F_SLOWEST_RANK_TIME AS slow_s,
           POSIX_F_FASTEST_RANK_TIME AS fast_s,
           POSIX_F_READ_TIME + POSIX_F_WRITE_TIME + POSIX_F_META_TIME AS time_s,
           abs(POSIX_F_SLOWEST_RANK_TIME - POSIX_F_FASTEST_RANK_TIME)
               / (POSIX_F_READ_TIME + POSIX_F_WRITE_TIME + POSIX_F_META_TIME) AS imbalance
    FROM posix WHERE rank = -1 AND POSIX_F_READ_TIME + POSIX_F_WRITE_TIME + POSIX_F_META_TIME > 0
), flagged AS (SELECT * FROM f WHERE imbalance > getvariable('rank_imbalance'))
SELECT 'high' AS severity, 'P19' AS drishti,
       printf('time imbalance on %d shared file(s): up to %s of a file''s I/O time between its slowest and '
              'fastest rank (%.3f s against %.3f s on %s)', count(*), fmt_pct(max(imbalance)),
              arg_max(slow_s, imbalance), arg_max(fast_s, imbalance), arg_max(file, imbalance)) AS detail,
       'find why the slowest rank is slow (more data, a slower path to the servers, contention): callid '
       || 'replay of the log shows each call''s disk operations' AS recommendation,
'callid replay app.darshan     # the job''s calls on the simulated file system, merged
callid report callid-out/merged.duckdb -o report.html   # the slowest calls and their disk operations' AS example,
       {'files': count(*), 'max_imbalance_share': round(max(imbalance), 4)} AS numbers,
       list(DISTINCT slowest) AS ranks, []::UBIGINT[] AS callids,
       list(file ORDER BY imbalance DESC, file) AS files, []::VARCHAR[] AS servers
FROM flagged
HAVING count(*) > 0
