-- severity: warning
-- marmot: 5.5 Interoperability
-- title: an external32 view whose etype or filetype is not portable (byte displacements)
-- rule: MPI 3.1 13.5.2, 13.5.1: a file in external32 is readable by another MPI implementation only through portable datatypes: predefined ones, or made of them with contiguous, vector, indexed, indexed_block, subarray, darray and dup; hvector, hindexed, hindexed_block, struct and resized give byte displacements that hold the writer's padding
-- columns: calls.func, calls.datarep, calls.etype, calls.filetype (set_view: the constructors of each)
-- needs: views
-- Decided from the constructors logged of each type (calls.etype, calls.filetype); one finding per
-- set_view (all its ranks: its coll_seq), naming the first non-portable constructor.
WITH views AS (
    SELECT rank, callid, func, file, coll_seq, t_start, etype, filetype,
           row_number() OVER (ORDER BY rank, t_start, callid) AS rn,
           regexp_extract(coalesce(etype, '') || ' ' || coalesce(filetype, ''),
                          '(^|[(, ])(hvector|hindexed_block|hindexed|struct|resized)\(', 2) AS culprit
    FROM calls
    WHERE func = 'MPI_File_set_view' AND lower(datarep) = 'external32' AND error IS NULL
)
SELECT list(DISTINCT rank ORDER BY rank) AS ranks, list(callid ORDER BY rank) AS callids,
       list(func ORDER BY rank) AS funcs, any_value(file) AS file,
       printf('a view in external32 of etype %s and filetype %s: %s is not portable (its byte displacements '
              || 'keep this machine''s layout), so another MPI implementation may not read the file back',
              any_value(etype), any_value(filetype), any_value(culprit)) AS detail
FROM views WHERE culprit <> ''
GROUP BY coalesce(coll_seq, -rn)
ORDER BY min(t_start)
