-- severity: error
-- marmot: 5.2 File manipulation
-- title: a file still open when the rank ended
-- rule: MPI 3.1 13.2.2: a process must close every file it opened before it calls MPI_FINALIZE
-- columns: calls.func, calls.rank, calls.fid, calls.file, calls.coll_seq, calls.error, calls.rid, waits.rid
-- needs: opens, closes, completions
-- One finding per open: a collective open is one call of all its ranks (its coll_seq); opens of no
-- collective call (coll_seq NULL) are grouped per file. The calls left pending on the handle (the
-- view `pending`: never waited for, or never ended) are named: MPI 3.1 13.2.2 asks for them too.
WITH never AS (  -- what each rank left pending on each handle it never closed
    SELECT rank, fid, list(callid ORDER BY t_start) AS callids, list(func ORDER BY t_start) AS funcs,
           string_agg(func || ' ' || why, ', ' ORDER BY t_start) AS what
    FROM pending WHERE t_done IS NULL GROUP BY rank, fid
)
SELECT list(o.rank ORDER BY o.rank) AS ranks,
       flatten(list([o.callid] || coalesce(n.callids, []) ORDER BY o.rank)) AS callids,
       flatten(list([o.func] || coalesce(n.funcs, []) ORDER BY o.rank)) AS funcs, any_value(o.file) AS file,
       'opened and never closed' || coalesce(', with calls never completed: ' || string_agg(
           'on rank ' || o.rank || ' ' || n.what, '; ' ORDER BY o.rank), '') AS detail
FROM calls o
LEFT JOIN never n ON n.rank = o.rank AND n.fid = o.fid
WHERE o.func = 'MPI_File_open' AND o.error IS NULL
  AND NOT EXISTS (SELECT 1 FROM calls c WHERE c.func = 'MPI_File_close' AND c.rank = o.rank AND c.fid = o.fid)
GROUP BY o.coll_seq, CASE WHEN o.coll_seq IS NULL THEN o.file END
ORDER BY min(o.t_start)
