-- severity: error
-- marmot: 5.2 File manipulation
-- title: an illegal combination of access modes at open
-- rule: MPI 3.1 13.2.1: one of RDONLY, WRONLY, RDWR; no CREATE or EXCL with RDONLY; no SEQUENTIAL with RDWR
-- columns: calls.func, calls.amode, calls.coll_seq
-- needs: opens
-- One finding per open (all its ranks: its coll_seq) and access mode.
WITH opens AS (
    SELECT rank, callid, func, file, coll_seq, t_start, amode, string_split(amode, ',') AS modes,
           row_number() OVER (ORDER BY rank, t_start, callid) AS rn
    FROM calls
    WHERE func = 'MPI_File_open' AND amode IS NOT NULL
), judged AS (
    SELECT *,
           concat_ws('; ',
               CASE WHEN len(list_filter(modes, lambda m: m IN ('RDONLY', 'WRONLY', 'RDWR'))) <> 1
                    THEN 'not exactly one of RDONLY, WRONLY, RDWR' END,
               CASE WHEN list_contains(modes, 'RDONLY') AND list_contains(modes, 'CREATE')
                    THEN 'CREATE with RDONLY' END,
               CASE WHEN list_contains(modes, 'RDONLY') AND list_contains(modes, 'EXCL')
                    THEN 'EXCL with RDONLY' END,
               CASE WHEN list_contains(modes, 'RDWR') AND list_contains(modes, 'SEQUENTIAL')
                    THEN 'SEQUENTIAL with RDWR' END) AS why
    FROM opens
)
SELECT list(rank ORDER BY rank) AS ranks, list(callid ORDER BY rank) AS callids,
       list(func ORDER BY rank) AS funcs, any_value(file) AS file,
       'access mode ' || coalesce(nullif(amode, ''), '(none)') || ': ' || any_value(why) AS detail
FROM judged
WHERE why <> ''
GROUP BY coll_seq, CASE WHEN coll_seq IS NULL THEN rn END, amode
ORDER BY min(t_start)
