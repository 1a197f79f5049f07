-- severity: error
-- marmot: 5.2 File manipulation
-- title: a write on a file opened read-only, or a read on one opened write-only
-- rule: MPI 3.1 13.2.1: a file opened MPI_MODE_RDONLY must not be written, nor one opened WRONLY read
-- columns: calls.func, calls.rank, calls.fid, calls.amode, calls.coll_seq
-- needs: accesses, opens
-- Each data access (the _begin of a split collective, not its _end) joined to the open of its
-- handle (same rank, same fid); flagged whether or not the implementation rejected it. One finding
-- per call: a collective access is one call on all its ranks (its coll_seq).
WITH access AS (
    SELECT c.rank, c.callid, c.func, c.file, c.coll_seq, c.t_start, c.error,
           regexp_extract(c.func, '^MPI_File_i?(read|write)', 1) AS verb,
           string_split(o.amode, ',') AS modes,
           row_number() OVER (ORDER BY c.rank, c.t_start, c.callid) AS rn
    FROM calls c
    JOIN calls o ON o.func = 'MPI_File_open' AND o.rank = c.rank AND o.fid = c.fid
    WHERE regexp_matches(c.func, '^MPI_File_i?(read|write)') AND NOT suffix(c.func, '_end')
), bad AS (
    SELECT *, CASE WHEN verb = 'write' THEN 'RDONLY' ELSE 'WRONLY' END AS mode
    FROM access
    WHERE verb = 'write' AND list_contains(modes, 'RDONLY')
       OR verb = 'read' AND list_contains(modes, 'WRONLY')
)
SELECT list(rank ORDER BY rank) AS ranks, list(callid ORDER BY rank) AS callids,
       list(func ORDER BY rank) AS funcs, any_value(file) AS file,
       any_value(func) || ' on a file opened MODE_' || any_value(mode)
           || CASE WHEN bool_and(error IS NOT NULL) THEN ' (the call failed)' ELSE '' END AS detail
FROM bad
GROUP BY coll_seq, CASE WHEN coll_seq IS NULL THEN rn END
ORDER BY min(t_start)
