-- severity: error
-- marmot: 5 Possible checks (the error classes the MPI standard gives I/O calls)
-- title: a call the MPI library failed, with its error class
-- rule: MPI 3.1 8.3, 13.7: a file call that fails returns an error class (files' default handler: MPI_ERRORS_RETURN)
-- columns: calls.func, calls.error, calls.coll_seq, calls.rank, calls.t_start
-- needs: errors
-- One finding per failed call (a collective one: all its ranks that failed, by coll_seq) and error
-- class. A call another check names already (its cause: e.g. A404 for a negative offset) is not
-- listed again (pipeline.checks drops it). The error is the call's `error` column, which starts with
-- the class's name (callid's tracers write it so); a call that never returned has no class.
WITH failed AS (
    SELECT rank, callid, func, file, coll_seq, t_start,
           regexp_extract(error, '^(MPI_ERR_[A-Z_]+|MPI error class -?\d+): ', 1) AS class,
           trim(regexp_replace(substr(error, strpos(error, ': ') + 2), '\s+', ' ', 'g')) AS message,
           row_number() OVER (ORDER BY rank, t_start, callid) AS rn
    FROM calls
    WHERE regexp_matches(error, '^(MPI_ERR_[A-Z_]+|MPI error class -?\d+): ')
)
SELECT list(rank ORDER BY rank) AS ranks, list(callid ORDER BY rank) AS callids,
       list(func ORDER BY rank) AS funcs, any_value(file) AS file,
       any_value(func) || ' failed with ' || class || ': ' || left(any_value(message), 200) AS detail
FROM failed
GROUP BY coll_seq, CASE WHEN coll_seq IS NULL THEN rn END, class
ORDER BY min(t_start)
