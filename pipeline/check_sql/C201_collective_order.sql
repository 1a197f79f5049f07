-- severity: error
-- marmot: 5.1 Classification of I/O calls and general checks
-- title: collective calls on a file in a different order, or missing, on some ranks
-- rule: MPI 3.1 5.13: all processes of the communicator must call collective operations in the same order
-- columns: calls.collective, calls.coll_seq (the k-th collective call on a file handle, equal on every rank), calls.func, calls.comm_size
-- needs: collectives
WITH coll AS (
    SELECT * FROM calls WHERE collective AND coll_seq IS NOT NULL AND fid IS NOT NULL
)
SELECT list(rank ORDER BY rank) AS ranks, list(callid ORDER BY rank) AS callids,
       list(func ORDER BY rank) AS funcs, any_value(file) AS file,
       CASE WHEN count(DISTINCT func) > 1
            THEN 'collective call ' || (coll_seq & 1048575) || ' on the file is '
                 || string_agg(DISTINCT func, ' on some ranks, ' ORDER BY func) || ' on others'
            ELSE 'collective call ' || (coll_seq & 1048575) || ' on the file (' || any_value(func)
                 || ') made by ' || count(DISTINCT rank) || ' of the ' || max(comm_size) || ' ranks'
       END AS detail
FROM coll
GROUP BY coll_seq
HAVING count(DISTINCT func) > 1 OR count(DISTINCT rank) < max(comm_size)
ORDER BY min(t_start)
