-- severity: error
-- marmot: 5.4 Data access
-- title: another collective call on a file handle between a split collective's begin and its end
-- rule: MPI 3.1 13.4.5: while a split collective is active on a handle no other collective I/O may use it
-- columns: calls.func, calls.collective, calls.coll_seq, calls.rank, calls.fid, calls.error, calls.t_start
-- needs: collectives, completions, closes
-- A successful _begin is active on its rank's handle until the next _end (or close) on it; every
-- other collective call on the handle meanwhile is flagged, a second _begin included (the file
-- system may reject it: it is flagged from the call, whatever its error).  The close and set_view
-- made while one is active are F103's and A405's findings, not repeated here.
WITH split AS (
    SELECT b.*, (SELECT min(e.t_start) FROM calls e
                 WHERE e.rank = b.rank AND e.fid = b.fid AND e.t_start > b.t_start
                   AND (ends_with(e.func, '_end') OR e.func = 'MPI_File_close')) AS t_stop
    FROM calls b WHERE ends_with(b.func, '_begin') AND b.error IS NULL AND b.fid IS NOT NULL
),
inside AS (
    SELECT s.rank, s.callid AS begin_callid, s.func AS begin_func, x.callid, x.func, x.file, x.coll_seq,
           x.t_start
    FROM split s JOIN calls x ON x.rank = s.rank AND x.fid = s.fid AND x.collective
                              AND x.t_start > s.t_start AND (s.t_stop IS NULL OR x.t_start < s.t_stop)
    WHERE NOT ends_with(x.func, '_end') AND x.func NOT IN ('MPI_File_close', 'MPI_File_set_view')
)
SELECT list(rank ORDER BY rank) AS ranks,
       flatten(list([begin_callid, callid] ORDER BY rank)) AS callids,
       flatten(list([begin_func, func] ORDER BY rank)) AS funcs,
       any_value(file) AS file,
       CASE WHEN ends_with(any_value(func), '_begin')
            THEN 'second split collective ' || any_value(func) || ' begun (collective call '
                 || (coll_seq & 1048575) || ') while ' || any_value(begin_func) || ' is active'
            ELSE any_value(func) || ' (collective call ' || (coll_seq & 1048575) || ') made between '
                 || any_value(begin_func) || ' and its _end'
       END || CASE WHEN count(*) > 1 THEN ' (on each of ' || count(*) || ' ranks)' ELSE '' END AS detail
FROM inside
GROUP BY coll_seq
ORDER BY min(t_start)
