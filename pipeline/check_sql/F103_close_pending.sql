-- severity: error
-- marmot: 5.2 File manipulation
-- title: a file closed with a non-blocking call or a split collective still pending on the rank
-- rule: MPI 3.1 13.2.2: a process must complete its requests and split collectives on a file, then close it
-- columns: calls.func, calls.rank, calls.fid, calls.rid, calls.error, calls.t_start, waits.rid, waits.t_start
-- Pending at the close: a non-blocking call (its rid) with no `waits` row before the close began, or
-- a split collective _begin (successful) with no _end on the handle before it (begin and end pair
-- up in order on a rank's handle: the real MPI-IO's split calls carry no rid).
WITH pending AS (
    SELECT n.rank, n.fid, n.callid, n.func, n.t_start, 'not waited for' AS why,
           (SELECT min(w.t_start) FROM waits w WHERE w.rank = n.rank AND w.rid = n.rid) AS t_done
    FROM calls n WHERE starts_with(n.func, 'MPI_File_i') AND n.rid IS NOT NULL
    UNION ALL
    SELECT b.rank, b.fid, b.callid, b.func, b.t_start, 'not ended',
           (SELECT min(e.t_start) FROM calls e WHERE e.rank = b.rank AND e.fid = b.fid
              AND ends_with(e.func, '_end') AND e.t_start > b.t_start)
    FROM calls b WHERE ends_with(b.func, '_begin') AND b.error IS NULL
),
per_rank AS (
    SELECT c.rank, c.coll_seq, c.file, min(c.t_start) AS t_start,
           [c.callid] || list(p.callid ORDER BY p.t_start) AS callids,
           [c.func] || list(p.func ORDER BY p.t_start) AS funcs,
           count(*) AS n, string_agg(p.func || ' ' || p.why, ', ' ORDER BY p.t_start) AS what
    FROM calls c
    JOIN pending p ON p.rank = c.rank AND p.fid = c.fid AND p.t_start < c.t_start
                  AND (p.t_done IS NULL OR p.t_done > c.t_start)
    WHERE c.func = 'MPI_File_close' AND c.error IS NULL
    GROUP BY c.rank, c.callid, c.func, c.file, c.coll_seq, c.t_start
)
SELECT list(rank ORDER BY rank) AS ranks, flatten(list(callids ORDER BY rank)) AS callids,
       flatten(list(funcs ORDER BY rank)) AS funcs, any_value(file) AS file,
       'closed with ' || n || ' call' || CASE WHEN n > 1 THEN 's' ELSE '' END || ' pending: ' || what
           || CASE WHEN count(*) > 1 THEN ' (on each of ' || count(*) || ' ranks)' ELSE '' END AS detail
FROM per_rank
GROUP BY coll_seq, n, what
ORDER BY min(t_start)
