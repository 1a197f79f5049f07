-- severity: error
-- marmot: 5.2 File manipulation
-- title: a file still open when the rank ended
-- rule: MPI 3.1 13.2.2: a process must close every file it opened before it calls MPI_FINALIZE
-- columns: calls.func, calls.rank, calls.fid, calls.file, calls.coll_seq, calls.error
-- needs: opens, closes
-- One finding per open: a collective open is one call of all its ranks (its coll_seq); opens of no
-- collective call (coll_seq NULL) are grouped per file.
SELECT list(o.rank ORDER BY o.rank) AS ranks, list(o.callid ORDER BY o.rank) AS callids,
       list(o.func ORDER BY o.rank) AS funcs, any_value(o.file) AS file,
       'opened and never closed' AS detail
FROM calls o
WHERE o.func = 'MPI_File_open' AND o.error IS NULL
  AND NOT EXISTS (SELECT 1 FROM calls c WHERE c.func = 'MPI_File_close' AND c.rank = o.rank AND c.fid = o.fid)
GROUP BY o.coll_seq, CASE WHEN o.coll_seq IS NULL THEN o.file END
ORDER BY min(o.t_start)
