-- severity: error
-- marmot: 5.1 Classification of I/O calls and general checks; 5.2 File manipulation; 5.3 File views; 5.6 Consistency
-- title: a collective call whose arguments must agree on all ranks differs between ranks
-- rule: MPI 3.1 13.2.1, 13.2.4, 13.3, 13.6.1: open's file name and amode, set_size's and preallocate's size, set_atomicity's flag, set_view's datarep and etype extent must be equal on all ranks
-- columns: calls.func, calls.coll_seq, calls.file, calls.amode, calls.size, calls.atomicity, calls.datarep, calls.etype_extent, calls.rank
-- needs: collectives, opens, views, resizes, atomicity
-- One finding per collective call (coll_seq) and argument; etypes are compared by extent.
WITH args AS (  -- (call, argument, value): the value as the detail shows it, key what must be equal
    SELECT rank, callid, func, file, coll_seq, t_start, 'access mode' AS arg, amode AS value, amode AS key
    FROM calls WHERE func = 'MPI_File_open' AND coll_seq IS NOT NULL
    UNION ALL
    SELECT rank, callid, func, file, coll_seq, t_start, 'file name', file, file
    FROM calls WHERE func = 'MPI_File_open' AND coll_seq IS NOT NULL
    UNION ALL
    SELECT rank, callid, func, file, coll_seq, t_start, -- (per function: C201 says when they differ)
           CASE func WHEN 'MPI_File_set_size' THEN 'size' ELSE 'preallocated size' END, size::VARCHAR,
           size::VARCHAR
    FROM calls WHERE func IN ('MPI_File_set_size', 'MPI_File_preallocate') AND coll_seq IS NOT NULL
    UNION ALL
    SELECT rank, callid, func, file, coll_seq, t_start, 'atomicity', atomicity::VARCHAR, atomicity::VARCHAR
    FROM calls WHERE func = 'MPI_File_set_atomicity' AND coll_seq IS NOT NULL
    UNION ALL
    SELECT rank, callid, func, file, coll_seq, t_start, 'datarep', datarep, datarep
    FROM calls WHERE func = 'MPI_File_set_view' AND coll_seq IS NOT NULL
    UNION ALL
    SELECT rank, callid, func, file, coll_seq, t_start, 'etype extent',
           etype || ' (' || etype_extent || ' bytes)', etype_extent::VARCHAR
    FROM calls WHERE func = 'MPI_File_set_view' AND coll_seq IS NOT NULL
),
valued AS (  -- the ranks giving each value
    SELECT coll_seq, arg, value, key, list(rank ORDER BY rank) AS rs, any_value(func) AS func
    FROM args GROUP BY coll_seq, arg, value, key
),
differ AS (
    SELECT coll_seq, arg,
           any_value(func)
               || CASE WHEN coll_seq & 1048575 > 0
                       THEN ' (collective call ' || (coll_seq & 1048575) || ' on the file)' ELSE '' END
               || ': ' || arg || ' ' || string_agg(
                   coalesce(value, 'none') || ' on rank' || CASE WHEN len(rs) > 1 THEN 's ' ELSE ' ' END
                       || array_to_string(rs[:8], ',') || CASE WHEN len(rs) > 8 THEN ',...' ELSE '' END,
                   ', ' ORDER BY rs[1]) AS detail
    FROM valued
    GROUP BY coll_seq, arg
    HAVING count(DISTINCT coalesce(key, 'none')) > 1
)
SELECT list(a.rank ORDER BY a.rank) AS ranks, list(a.callid ORDER BY a.rank) AS callids,
       list(a.func ORDER BY a.rank) AS funcs, any_value(a.file) AS file, any_value(d.detail) AS detail
FROM differ d JOIN args a USING (coll_seq, arg)
GROUP BY d.coll_seq, d.arg
ORDER BY min(a.t_start), d.arg
