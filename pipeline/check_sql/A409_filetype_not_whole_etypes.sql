-- severity: error
-- marmot: 5.3 File views
-- title: a view's filetype with holes or blocks that are not whole etypes
-- rule: MPI 3.1 13.3: a filetype must be constructed of the etype: every block of data, and so every hole between, before and after them, a multiple of the etype
-- columns: calls.func, calls.etype, calls.etype_extent, calls.region_offsets (set_view: the filetype's blocks), calls.region_lengths, calls.extent
-- needs: views
-- The MPI library checks only the filetype's size (ROMIO: a multiple of the etype's size); the holes it
-- leaves to the program.  Decided for a predefined etype (an MPI_* name: its size is its extent; a
-- derived etype's own holes make blocks that are not multiples of its extent): a block starting at a
-- byte, or of a length, or a filetype extent that is not a multiple of the etype's extent.  One finding
-- per set_view (all its ranks: its coll_seq).
WITH views AS (
    SELECT rank, callid, func, file, coll_seq, t_start, region_offsets AS offs, region_lengths AS lens,
           extent, etype, etype_extent AS e, row_number() OVER (ORDER BY rank, t_start, callid) AS rn
    FROM calls
    WHERE func = 'MPI_File_set_view' AND len(region_offsets) > 0 AND error IS NULL AND etype LIKE 'MPI\_%' ESCAPE '\'
      AND etype_extent > 1
), judged AS (
    SELECT *, list_filter(range(1, len(offs) + 1), lambda i: offs[i] % e <> 0 OR lens[i] % e <> 0) AS bad,
           extent % e <> 0 AS bad_extent
    FROM views
), flagged AS (
    SELECT *, CASE WHEN len(bad) > 0
                   THEN printf('block %d of %d: %d bytes at byte %d', bad[1], len(offs), lens[bad[1]], offs[bad[1]])
                   ELSE printf('its extent %d', extent) END AS first
    FROM judged WHERE len(bad) > 0 OR bad_extent
)
SELECT list(DISTINCT rank ORDER BY rank) AS ranks, list(callid ORDER BY rank) AS callids,
       list(func ORDER BY rank) AS funcs, any_value(file) AS file,
       printf('the filetype is not whole %ss (%d bytes each): %s (its %d blocks: %s)', any_value(etype),
              any_value(e), arg_min(first, rank), any_value(len(offs)),
              CASE WHEN any_value(len(offs)) <= 8 THEN any_value(list_zip(offs, lens))::VARCHAR ELSE '...' END)
           AS detail
FROM flagged
GROUP BY coalesce(coll_seq, -rn)
ORDER BY min(t_start)
