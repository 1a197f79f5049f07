-- severity: error
-- marmot: 5.3 File views
-- title: an etype or filetype built from absolute addresses
-- rule: MPI 3.1 13.3: absolute addresses must not be used in the construction of the etype and filetype (a view's displacements are bytes of the file, not of memory)
-- columns: calls.func, calls.type_issues ('address': a block of the etype or filetype at an address of the process's memory, found by the tracer), calls.etype, calls.filetype, calls.region_offsets
-- needs: views
-- The tracer compares the types' block displacements with the process's memory map (addresses of at
-- least 4 GiB: a program built position-independent, as Debian builds by default, has its data there).
-- One finding per set_view (all its ranks: its coll_seq).
WITH views AS (
    SELECT rank, callid, func, file, coll_seq, t_start, etype, filetype, region_offsets,
           row_number() OVER (ORDER BY rank, t_start, callid) AS rn
    FROM calls
    WHERE func = 'MPI_File_set_view' AND list_contains(string_split(type_issues, ','), 'address')
)
SELECT list(DISTINCT rank ORDER BY rank) AS ranks, list(callid ORDER BY rank) AS callids,
       list(func ORDER BY rank) AS funcs, any_value(file) AS file,
       printf('a view of etype %s and filetype %s with a block at an address of the process''s memory%s: '
              || 'the type was built from absolute addresses (MPI_Get_address, MPI_BOTTOM), and the file '
              || 'offsets it gives are those addresses', any_value(etype), any_value(filetype),
              CASE WHEN len(any_value(region_offsets)) > 0
                   THEN printf(' (the filetype''s first block at byte 0x%x)', any_value(region_offsets)[1])
                   ELSE '' END) AS detail
FROM views
GROUP BY coalesce(coll_seq, -rn)
ORDER BY min(t_start)
