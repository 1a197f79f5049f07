-- severity: error
-- marmot: 5.3 File views
-- title: a file view set with a non-blocking call or a split collective still pending on the handle
-- rule: MPI 3.1 13.3: setting a view is erroneous while requests or split collectives on the handle pend
-- columns: calls.func, calls.rank, calls.fid, calls.rid, calls.error, calls.t_start, waits.rid, waits.t_start
-- needs: views, completions
-- Pending at the set_view: what the view `pending` (_views.sql) says was outstanding when it began.
WITH per_rank AS (
    SELECT v.rank, v.coll_seq, v.file, min(v.t_start) AS t_start,
           [v.callid] || list(p.callid ORDER BY p.t_start) AS callids,
           [v.func] || list(p.func ORDER BY p.t_start) AS funcs,
           count(*) AS n, string_agg(p.func || ' ' || p.why, ', ' ORDER BY p.t_start) AS what
    FROM calls v
    JOIN pending p ON p.rank = v.rank AND p.fid = v.fid AND p.t_start < v.t_start
                  AND (p.t_done IS NULL OR p.t_done > v.t_start)
    WHERE v.func = 'MPI_File_set_view'
    GROUP BY v.rank, v.callid, v.func, v.file, v.coll_seq, v.t_start
)
SELECT list(rank ORDER BY rank) AS ranks, flatten(list(callids ORDER BY rank)) AS callids,
       flatten(list(funcs ORDER BY rank)) AS funcs, any_value(file) AS file,
       'view set (collective call ' || (coll_seq & 1048575) || ') with ' || n || ' call'
           || CASE WHEN n > 1 THEN 's' ELSE '' END || ' pending: ' || what
           || CASE WHEN count(*) > 1 THEN ' (on each of ' || count(*) || ' ranks)' ELSE '' END AS detail
FROM per_rank
GROUP BY coll_seq, n, what
ORDER BY min(t_start)
