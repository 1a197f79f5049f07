-- severity: error
-- marmot: 5.4 Data access
-- title: a negative explicit offset, or a negative view displacement
-- rule: MPI 3.1 13.4.2, 13.3: explicit offsets of data access calls and view displacements are non-negative
-- columns: calls.func, calls.file_offset (as passed if the call failed on it; set_view: disp), calls.amode
-- needs: functions, views, opens
-- A set_view with MPI_DISPLACEMENT_CURRENT (-54278278 in MPICH and Open MPI) is legal on a file
-- opened MODE_SEQUENTIAL only. One finding per call: a collective call is one call on all its
-- ranks (its coll_seq).
WITH bad AS (
    SELECT c.rank, c.callid, c.func, c.file, c.coll_seq, c.t_start,
           CASE WHEN c.func <> 'MPI_File_set_view' THEN 'at negative offset'
                WHEN c.file_offset = -54278278
                    THEN 'with MPI_DISPLACEMENT_CURRENT on a file not opened SEQUENTIAL'
                ELSE 'with negative displacement' END AS what, c.file_offset,
           row_number() OVER (ORDER BY c.rank, c.t_start, c.callid) AS rn
    FROM calls c
    LEFT JOIN calls o ON o.func = 'MPI_File_open' AND o.rank = c.rank AND o.fid = c.fid
    WHERE c.file_offset < 0
      AND (regexp_full_match(c.func, 'MPI_File_i?(read|write)_at(_all)?(_begin)?')
           OR c.func = 'MPI_File_set_view'
              AND NOT (c.file_offset = -54278278
                       AND list_contains(string_split(o.amode, ','), 'SEQUENTIAL')))
)
SELECT list(rank ORDER BY rank) AS ranks, list(callid ORDER BY rank) AS callids,
       list(func ORDER BY rank) AS funcs, any_value(file) AS file,
       any_value(func) || ' ' || any_value(what)
           || CASE WHEN any_value(what) LIKE '%CURRENT%' THEN ''
                   ELSE ' ' || string_agg(DISTINCT file_offset::VARCHAR, ', ') END AS detail
FROM bad
GROUP BY coll_seq, CASE WHEN coll_seq IS NULL THEN rn END
ORDER BY min(t_start)
