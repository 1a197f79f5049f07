-- severity: error
-- marmot: 5.4 Data access
-- title: an explicit offset, individual file pointer or view displacement used on a file opened MODE_SEQUENTIAL
-- rule: MPI 3.1 13.2.1, 13.3, 13.4: a MPI_MODE_SEQUENTIAL file allows shared file pointer access only, no seeks, and views at MPI_DISPLACEMENT_CURRENT only
-- columns: calls.func, calls.rank, calls.fid, calls.amode, calls.coll_seq, calls.file_offset (set_view: disp)
-- needs: functions, seeks, opens, views
-- The explicit-offset calls (_at, _at_all, ...), the individual file pointer calls (read, write,
-- read_all, iwrite, ...; a split collective's _begin, not its _end), seek, seek_shared,
-- get_position and get_position_shared, a set_view whose displacement is not
-- MPI_DISPLACEMENT_CURRENT (-54278278 in MPICH and Open MPI), on a handle whose open had SEQUENTIAL.
-- One finding per call: a collective call is one call on all its ranks (its coll_seq).
WITH bad AS (
    SELECT c.rank, c.callid, c.func, c.file, c.coll_seq, c.t_start, c.error,
           CASE WHEN regexp_matches(c.func, '_at(_all)?(_begin)?$') THEN 'an explicit offset'
                WHEN c.func IN ('MPI_File_seek_shared', 'MPI_File_get_position_shared')
                    THEN 'the shared file pointer''s position'
                WHEN c.func = 'MPI_File_set_view'
                    THEN 'displacement ' || c.file_offset || ', not MPI_DISPLACEMENT_CURRENT,'
                ELSE 'the individual file pointer' END AS what,
           row_number() OVER (ORDER BY c.rank, c.t_start, c.callid) AS rn
    FROM calls c
    JOIN calls o ON o.func = 'MPI_File_open' AND o.rank = c.rank AND o.fid = c.fid
    WHERE list_contains(string_split(o.amode, ','), 'SEQUENTIAL')
      AND (regexp_full_match(c.func, 'MPI_File_i?(read|write)(_at)?(_all)?(_begin)?')
           OR c.func IN ('MPI_File_seek', 'MPI_File_seek_shared', 'MPI_File_get_position',
                         'MPI_File_get_position_shared')
           OR c.func = 'MPI_File_set_view' AND c.file_offset IS DISTINCT FROM -54278278)
)
SELECT list(rank ORDER BY rank) AS ranks, list(callid ORDER BY rank) AS callids,
       list(func ORDER BY rank) AS funcs, any_value(file) AS file,
       any_value(func) || ' uses ' || any_value(what) || ' on a file opened MODE_SEQUENTIAL'
           || CASE WHEN bool_and(error IS NOT NULL) THEN ' (the call failed)' ELSE '' END AS detail
FROM bad
GROUP BY coll_seq, CASE WHEN coll_seq IS NULL THEN rn END
ORDER BY min(t_start)
