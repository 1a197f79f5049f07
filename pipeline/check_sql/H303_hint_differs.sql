-- severity: error
-- marmot: 5.2 File manipulation
-- title: a hint that must agree on all ranks has different values in one collective call
-- rule: MPI 3.1 13.2.8: a hint marked [SAME] must have one value on all ranks of a collective call
-- columns: calls.func, calls.hints, calls.coll_seq, calls.rank
-- needs: hints, collectives
-- The [SAME] keys of MPI 3.1 13.2.8 (filename and access_style are not among them). A rank of the
-- call that leaves out a key the others pass counts as a different value.
WITH coll AS (
    SELECT rank, callid, func, file, coll_seq, t_start, hints
    FROM calls
    WHERE func IN ('MPI_File_open', 'MPI_File_set_info', 'MPI_File_set_view') AND coll_seq IS NOT NULL
), pairs AS (
    SELECT coll_seq, rank, key, value FROM hint_items
    WHERE coll_seq IS NOT NULL AND key IN (SELECT key FROM reserved_hints WHERE same)
), per_rank AS (  -- every rank of the call, for every [SAME] key some rank of it passed
    SELECT c.*, k.key, coalesce('''' || p.value || '''', 'not set') AS value
    FROM (SELECT DISTINCT coll_seq, key FROM pairs) k
    JOIN coll c USING (coll_seq)
    LEFT JOIN pairs p ON p.coll_seq = k.coll_seq AND p.rank = c.rank AND p.key = k.key
), by_value AS (
    SELECT coll_seq, key, value, list(rank ORDER BY rank) AS vranks,
           list({'rank': rank, 'callid': callid, 'func': func} ORDER BY rank) AS vcalls,
           any_value(file) AS file, min(t_start) AS t_start
    FROM per_rank
    GROUP BY coll_seq, key, value
), differing AS (
    SELECT coll_seq, key, any_value(file) AS file, min(t_start) AS t_start,
           list_sort(flatten(list(vcalls))) AS calls_of,
           string_agg(value || ' on rank ' || array_to_string(vranks, ','), ', ' ORDER BY vranks[1])
               AS values_of
    FROM by_value
    GROUP BY coll_seq, key
    HAVING count(*) > 1
)
SELECT list_transform(calls_of, lambda c: c.rank) AS ranks,
       list_transform(calls_of, lambda c: c.callid) AS callids,
       list_transform(calls_of, lambda c: c.func) AS funcs, file,
       'hint ' || key || ' differs between the ranks of ' || calls_of[1].func || ': ' || values_of AS detail
FROM differing
ORDER BY t_start, key
