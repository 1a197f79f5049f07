-- severity: error
-- marmot: 5.4 Data access
-- title: shared file pointer calls while the ranks' views of the file differ
-- rule: MPI 3.1 13.4.4: to use the shared file pointer, all processes that opened the file must have the same file view
-- columns: calls.func, calls.rank, calls.fid, calls.coll_seq (open), calls.file_offset (set_view: disp), calls.etype, calls.filetype, calls.etype_extent, calls.extent, calls.region_offsets, calls.region_lengths, calls.datarep
-- needs: functions, opens, views, seeks
-- The view in effect at each shared file pointer call (read/write _shared and _ordered, their
-- split and non-blocking forms, seek_shared, get_position_shared) is the rank's last successful
-- set_view on the handle before it (none: the default view), compared by displacement, etype
-- extent, filetype typemap and extent, and data representation, among the calls made under one
-- set_view (a collective call: its coll_seq) of one handle (known on every rank by its open's
-- coll_seq). One finding per such set_view whose shared pointer calls saw more than one view.
WITH handles AS (
    SELECT rank, fid, file, coll_seq >> 20 AS handle
    FROM calls WHERE func = 'MPI_File_open' AND error IS NULL AND coll_seq IS NOT NULL
),
views AS (
    SELECT rank, fid, t_start, coll_seq AS epoch,
           concat_ws('|', file_offset, etype_extent, extent, region_offsets::VARCHAR,
                     region_lengths::VARCHAR, datarep) AS view,
           'displacement ' || coalesce(file_offset::VARCHAR, '?') || ', etype ' || coalesce(etype, '?')
               || ', filetype ' || coalesce(filetype, '?') AS said
    FROM calls WHERE func = 'MPI_File_set_view' AND error IS NULL
),
shared AS (
    SELECT c.rank, c.callid, c.func, c.t_start, h.file, h.handle, v.epoch,
           coalesce(v.view, 'default') AS view, coalesce(v.said, 'the default view') AS said
    FROM calls c
    JOIN handles h ON h.rank = c.rank AND h.fid = c.fid
    ASOF LEFT JOIN views v ON v.rank = c.rank AND v.fid = c.fid AND c.t_start > v.t_start
    WHERE regexp_full_match(c.func, 'MPI_File_i?(read|write)_(shared|ordered)(_begin)?')
       OR c.func IN ('MPI_File_seek_shared', 'MPI_File_get_position_shared')
),
seen AS (  -- each view under a set_view of a handle, its ranks and their first call under it
    SELECT handle, epoch, view, any_value(said) AS said, list(DISTINCT rank ORDER BY rank) AS rs,
           arg_min(func, t_start) AS func, min(t_start) AS t_start
    FROM shared GROUP BY handle, epoch, view
)
SELECT list(DISTINCT s.rank ORDER BY s.rank) AS ranks,
       list(s.callid ORDER BY s.rank, s.t_start)[:16] AS callids,
       list(s.func ORDER BY s.rank, s.t_start)[:16] AS funcs, any_value(s.file) AS file,
       'shared file pointer calls under ' || count(DISTINCT s.view) || ' views: ' || (
           SELECT string_agg(said || ' on rank' || CASE WHEN len(rs) > 1 THEN 's ' ELSE ' ' END
                             || array_to_string(rs[:8], ',') || CASE WHEN len(rs) > 8 THEN ',...' ELSE '' END
                             || ' (' || func || ')', '; ' ORDER BY t_start)
           FROM seen WHERE seen.handle = s.handle AND seen.epoch IS NOT DISTINCT FROM s.epoch) AS detail
FROM shared s
GROUP BY s.handle, s.epoch
HAVING count(DISTINCT s.view) > 1
ORDER BY min(s.t_start)
