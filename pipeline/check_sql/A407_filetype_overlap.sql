-- severity: error
-- marmot: 5.3 File views
-- title: a view with overlapping etype or filetype blocks on a file opened for writing
-- rule: MPI 3.1 13.3: on a file opened for writing, neither the etype nor the filetype may specify overlapping regions
-- columns: calls.func, calls.region_offsets, calls.region_lengths, calls.extent (set_view), calls.type_issues ('overlapping': the etype's, found by the tracer), calls.amode
-- needs: views, opens
-- The filetype tiles the file every extent bytes: its blocks overlap when two of one tile share
-- bytes, or when a block of tile 0 shares bytes with a block of a later tile (shifted by k extents:
-- it reaches past the extent). The latter is decided on the blocks wrapped onto [0, extent) (a
-- block crossing it is cut in two): the tiles overlap exactly when the wrapped blocks do, or a
-- block is longer than the extent. The etype's typemap is the program's alone: its tracer says
-- whether it overlaps. Only set_view on files opened WRONLY or RDWR. One finding per set_view (all
-- its ranks: its coll_seq).
WITH written AS (
    SELECT c.rank, c.callid, c.func, c.file, c.coll_seq, c.t_start, c.region_offsets AS offs,
           c.region_lengths AS lens, c.extent, c.etype,
           list_contains(string_split(c.type_issues, ','), 'overlapping') AS etype_overlaps,
           row_number() OVER (ORDER BY c.rank, c.t_start, c.callid) AS rn
    FROM calls c
    JOIN calls o ON o.func = 'MPI_File_open' AND o.rank = c.rank AND o.fid = c.fid
    WHERE c.func = 'MPI_File_set_view' AND list_has_any(string_split(o.amode, ','), ['WRONLY', 'RDWR'])
), views AS (
    SELECT * FROM written WHERE len(offs) > 0
), blocks AS (
    SELECT rn, extent, unnest(offs) AS o, unnest(lens) AS n, generate_subscripts(offs, 1) AS i
    FROM views
), in_tile AS (  -- a block starting before the end of one that starts earlier (or at the same byte)
    SELECT rn, i, o, n,
           max(o + n) OVER w AS reach, arg_max(o, o + n) OVER w AS po, arg_max(n, o + n) OVER w AS pn
    FROM blocks
    WINDOW w AS (PARTITION BY rn ORDER BY o, i ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
), wrapped AS (  -- each block as pieces on [0, extent); q: the tile the piece's bytes are in
    SELECT rn, i, o, n, extent, s, least(s + n, extent) AS e, (o - s) // extent AS q
    FROM (SELECT *, ((o % extent) + extent) % extent AS s FROM blocks WHERE extent > 0 AND n <= extent)
    UNION ALL
    SELECT rn, i, o, n, extent, 0 AS s, s + n - extent AS e, (o - s) // extent + 1 AS q
    FROM (SELECT *, ((o % extent) + extent) % extent AS s FROM blocks WHERE extent > 0 AND n <= extent)
    WHERE s + n > extent
), on_circle AS (
    SELECT *, max(e) OVER w AS reach, arg_max({'o': o, 'n': n, 'q': q}, e) OVER w AS p
    FROM wrapped
    WINDOW w AS (PARTITION BY rn ORDER BY s, i ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
), clash AS (
    SELECT rn, 0 AS pass, i, 'blocks [' || po || ', ' || (po + pn) || ') and [' || o || ', ' || (o + n)
               || ') overlap' AS why
    FROM in_tile
    WHERE o < reach
    UNION ALL
    SELECT b.rn, 1, b.i, 'block [' || b.o || ', ' || (b.o + b.n) || ') is longer than the extent ('
               || b.extent || ') and overlaps its copy in the next tile'
    FROM blocks b
    WHERE b.extent > 0 AND b.n > b.extent
    UNION ALL  -- pieces of blocks a and p overlap: a meets p shifted by k = q(a) - q(p) extents
    SELECT rn, 2, i,
           CASE WHEN q >= p.q
                THEN 'block [' || o || ', ' || (o + n) || ') overlaps block [' || (p.o + (q - p.q) * extent)
                     || ', ' || (p.o + p.n + (q - p.q) * extent) || ') of tile ' || (q - p.q)
                ELSE 'block [' || p.o || ', ' || (p.o + p.n) || ') overlaps block ['
                     || (o + (p.q - q) * extent) || ', ' || (o + n + (p.q - q) * extent) || ') of tile '
                     || (p.q - q)
           END
    FROM on_circle
    WHERE s < reach AND q <> p.q
), found AS (
    SELECT v.rank, v.callid, v.func, v.file, v.coll_seq, v.t_start, v.rn, 0 AS pass,
           'filetype of ' || len(v.offs) || CASE WHEN len(v.offs) = 1 THEN ' block' ELSE ' blocks' END
           || ', extent ' || v.extent || ': ' || c.why AS why
    FROM views v
    JOIN (SELECT rn, arg_min(why, (pass, i)) AS why FROM clash GROUP BY rn) c USING (rn)
    UNION ALL
    SELECT rank, callid, func, file, coll_seq, t_start, rn, 1,
           'the etype ' || coalesce(etype, '?') || ' holds some bytes more than once' AS why
    FROM written WHERE etype_overlaps
), bad AS (  -- (one reason per set_view: the filetype's first)
    SELECT * FROM found QUALIFY row_number() OVER (PARTITION BY rn ORDER BY pass) = 1
)
SELECT list(rank ORDER BY rank) AS ranks, list(callid ORDER BY rank) AS callids,
       list(func ORDER BY rank) AS funcs, any_value(file) AS file,
       arg_min(why, rank)
           || CASE WHEN count(DISTINCT why) > 1 THEN ' (rank ' || min(rank) || '; other ranks differ)'
                   ELSE '' END AS detail
FROM bad
GROUP BY coll_seq, CASE WHEN coll_seq IS NULL THEN rn END
ORDER BY min(t_start)
