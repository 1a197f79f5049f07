-- severity: error
-- marmot: 5.2 File manipulation
-- title: a reserved hint with a value of the wrong type
-- rule: MPI 3.1 13.2.8: each reserved file hint has a value type (integer, boolean, list of integers, ...)
-- columns: calls.func, calls.hints, calls.coll_seq
-- needs: hints
-- Types as MPI 3.1 13.2.8 gives them: integers (sizes and counts, so no sign), booleans true/false,
-- comma-separated lists of integers (chunked*), access_style a comma-separated list of its seven
-- words. file_perm is a string whose valid values the implementation defines: taken as the integer
-- (permission bits) every implementation expects. filename and io_node_list are free strings.
-- One finding per (key, call): a collective call is one call on all its ranks (its coll_seq).
WITH typed AS (
    SELECT *,
           CASE WHEN key IN ('cb_block_size', 'cb_buffer_size', 'cb_nodes', 'nb_proc', 'num_io_nodes',
                             'striping_factor', 'striping_unit', 'file_perm')
                     AND NOT regexp_full_match(value, '[0-9]+') THEN 'a non-negative integer'
                WHEN key IN ('chunked', 'chunked_item', 'chunked_size')
                     AND NOT regexp_full_match(value, '[0-9]+( *, *[0-9]+)*')
                    THEN 'a comma-separated list of integers'
                WHEN key = 'collective_buffering' AND lower(value) NOT IN ('true', 'false')
                    THEN 'a boolean (true or false)'
                WHEN key = 'access_style'
                     AND NOT list_bool_and(list_transform(string_split(value, ','), lambda w: trim(w) IN (
                         'read_once', 'write_once', 'read_mostly', 'write_mostly', 'sequential',
                         'reverse_sequential', 'random')))
                    THEN 'a comma-separated list of read_once, write_once, read_mostly, write_mostly, '
                         || 'sequential, reverse_sequential, random'
           END AS wanted,
           '''' || value || '''' AS quoted
    FROM hint_items
)
SELECT list(rank ORDER BY rank) AS ranks, list(callid ORDER BY rank) AS callids,
       list(func ORDER BY rank) AS funcs, any_value(file) AS file,
       'hint ' || key || '=' || string_agg(DISTINCT quoted, ', ' ORDER BY quoted)
           || ' passed to ' || any_value(func) || ': the value must be ' || any_value(wanted) AS detail
FROM typed
WHERE wanted IS NOT NULL
GROUP BY key, coll_seq, CASE WHEN coll_seq IS NULL THEN call_no END
ORDER BY min(t_start), key
