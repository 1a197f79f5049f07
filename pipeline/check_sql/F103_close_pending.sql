-- severity: error
-- marmot: 5.2 File manipulation
-- title: a file closed with a non-blocking call or a split collective still pending on the rank
-- rule: MPI 3.1 13.2.2: a process must complete its requests and split collectives on a file, then close it
-- columns: calls.func, calls.rank, calls.fid, calls.rid, calls.error, calls.t_start, waits.rid, waits.t_start
-- needs: closes, completions
-- Pending at the close: what the view `pending` (_views.sql) says was outstanding when it began.
WITH per_rank AS (
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
