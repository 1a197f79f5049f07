-- severity: error
-- marmot: 5.3 File views
-- title: a view's filetype with negative or decreasing displacements
-- rule: MPI 3.1 13.3: the displacements of a filetype's typemap must be non-negative and non-decreasing
-- columns: calls.func, calls.region_offsets (set_view: the filetype's blocks, typemap order), calls.coll_seq
-- needs: views
-- Decided on the start displacement of each block (blocks in order that overlap are A407's
-- business, not a decrease). One finding per set_view (all its ranks: its coll_seq).
WITH views AS (
    SELECT rank, callid, func, file, coll_seq, t_start, region_offsets AS offs,
           row_number() OVER (ORDER BY rank, t_start, callid) AS rn
    FROM calls
    WHERE func = 'MPI_File_set_view' AND len(region_offsets) > 0
), judged AS (
    SELECT *, list_filter(offs, lambda d: d < 0) AS negative,
           list_filter(range(2, len(offs) + 1), lambda i: offs[i] < offs[i - 1]) AS falls
    FROM views
), bad AS (
    SELECT *,
           CASE WHEN len(offs) <= 8 THEN 'filetype displacements ' || offs::VARCHAR
                ELSE 'filetype of ' || len(offs) || ' blocks' END || ': '
           || concat_ws(' and ',
                  CASE WHEN len(negative) > 0
                       THEN 'negative ' || array_to_string(negative[:3], ', ')
                            || CASE WHEN len(negative) > 3 THEN ', ...' ELSE '' END END,
                  CASE WHEN len(falls) > 0
                       THEN 'decreasing at ' || array_to_string(list_transform(falls[:3],
                                lambda i: offs[i - 1] || ' -> ' || offs[i]), ', ')
                            || CASE WHEN len(falls) > 3 THEN ', ...' ELSE '' END END)
           AS why
    FROM judged
    WHERE len(negative) > 0 OR len(falls) > 0
)
SELECT list(rank ORDER BY rank) AS ranks, list(callid ORDER BY rank) AS callids,
       list(func ORDER BY rank) AS funcs, any_value(file) AS file,
       arg_min(why, rank)
           || CASE WHEN count(DISTINCT why) > 1 THEN ' (rank ' || min(rank) || '; other ranks differ)'
                   ELSE '' END
           AS detail
FROM bad
GROUP BY coll_seq, CASE WHEN coll_seq IS NULL THEN rn END
ORDER BY min(t_start)
