-- severity: error
-- marmot: 5.4 Data access
-- title: a read into a buffer whose datatype holds some bytes more than once
-- rule: MPI 3.1 13.4.1 (and 3.3.2 for receives): the datatype of a read's buffer must not specify overlapping regions (where would the byte read into two places go?); a write from one is correct
-- columns: calls.func, calls.type_issues ('overlapping': found by the tracer on the buffer's typemap, its count copies), calls.datatype, calls.count
-- needs: accesses, buffers
-- One finding per read (each rank's own: a collective read's ranks pass their own buffers).
SELECT [rank] AS ranks, [callid] AS callids, [func] AS funcs, file,
       printf('%s reads %d x %s into a buffer whose datatype holds some bytes more than once (the '
              || 'overlapping ones receive the data twice, in an order MPI leaves undefined)',
              func, count, coalesce(datatype, 'a derived type')) AS detail
FROM calls
WHERE func LIKE 'MPI\_File\_%read%' ESCAPE '\' AND func NOT LIKE '%\_end' ESCAPE '\'
  AND list_contains(string_split(type_issues, ','), 'overlapping')
ORDER BY t_start, rank
