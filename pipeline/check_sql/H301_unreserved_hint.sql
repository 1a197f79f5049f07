-- severity: warning
-- marmot: 5.2 File manipulation
-- title: a hint key the MPI standard does not reserve (not portable)
-- rule: MPI 3.1 13.2.8: only the reserved file hint keys are portable; others are implementation specific
-- columns: calls.func, calls.hints, calls.coll_seq
-- One finding per (key, call): a collective call (open, set_info, set_view) is one call on all its
-- ranks (its coll_seq); a delete is a call of its own rank.
WITH hinted AS (
    SELECT rank, callid, func, file, coll_seq, t_start, hints,
           row_number() OVER (ORDER BY rank, t_start, callid) AS rn
    FROM calls
    WHERE func IN ('MPI_File_open', 'MPI_File_set_info', 'MPI_File_set_view', 'MPI_File_delete')
      AND hints IS NOT NULL
), pairs AS (
    SELECT * EXCLUDE (pair), split_part(pair, '=', 1) AS key
    FROM (SELECT *, unnest(string_split(hints, ';')) AS pair FROM hinted)
    WHERE pair <> ''
)
SELECT list(rank ORDER BY rank) AS ranks, list(callid ORDER BY rank) AS callids,
       list(func ORDER BY rank) AS funcs, any_value(file) AS file,
       'hint key ' || key || ' passed to ' || any_value(func) || ' is not reserved by the MPI standard'
           AS detail
FROM pairs
WHERE key NOT IN ('access_style', 'collective_buffering', 'cb_block_size', 'cb_buffer_size', 'cb_nodes',
                  'chunked', 'chunked_item', 'chunked_size', 'filename', 'file_perm', 'io_node_list',
                  'nb_proc', 'num_io_nodes', 'striping_factor', 'striping_unit')
GROUP BY key, coll_seq, CASE WHEN coll_seq IS NULL THEN rn END
ORDER BY min(t_start), key
