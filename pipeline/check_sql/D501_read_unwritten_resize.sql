-- severity: error
-- marmot: 5.6 Consistency
-- title: a read of bytes that MPI_File_set_size or preallocate added to the file and nobody wrote
-- rule: MPI 3.1 13.2.4, 13.2.5: the data in the region a resize or preallocation adds beyond the old size is undefined, so reading it before it is written is erroneous
-- columns: calls.func, calls.file, calls.size (set_size, preallocate: the size passed), calls.coll_seq, calls.file_offset, calls.region_offsets, calls.region_lengths, calls.t_start, calls.t_end, calls.error, calls.amode, rpcs.op
-- needs: accesses, resizes, opens

-- The old size is the end of everything written to the file (any rank) before the resize, counted
-- from the file's creation in the trace: an open that sent a create request to callid's simulated
-- file system, one with MODE_CREATE and MODE_EXCL, or a MPI_File_set_size to 0.  A file the trace did
-- not create has contents the trace does not know, so it is not checked.  One finding per read,
-- naming the latest resize whose added region it reads where no write before the read (by time, any
-- rank) put data.
WITH
created AS (SELECT DISTINCT rank, callid FROM rpcs WHERE op = 'create' AND error IS NULL),
born AS (  -- when the file was created, or truncated to nothing (the first rank's call of the collective)
    SELECT c.file, min(c.t_start) AS t_born
    FROM calls c LEFT JOIN created k ON k.rank = c.rank AND k.callid = c.callid
    WHERE c.func = 'MPI_File_open' AND c.error IS NULL
    GROUP BY c.file, c.coll_seq, CASE WHEN c.coll_seq IS NULL THEN c.callid END
    HAVING bool_or(k.callid IS NOT NULL
                   OR list_has_all(string_split(coalesce(c.amode, ''), ','), ['CREATE', 'EXCL']))
    UNION
    SELECT file, min(t_start) FROM calls
    WHERE func = 'MPI_File_set_size' AND size = 0 AND error IS NULL
    GROUP BY file, coll_seq, CASE WHEN coll_seq IS NULL THEN callid END
),
-- every byte range of a data access that succeeded, with the creation of the file it went to
rng AS MATERIALIZED (
    SELECT a.*, b.t_born FROM (
        SELECT acc, rank, callid, func, file, t_start AS t0, t_end AS t1, contains(func, 'write') AS wr,
               unnest(CASE WHEN len(coalesce(region_offsets, [])) > 0 THEN region_offsets
                           ELSE [file_offset] END) AS lo,
               unnest(CASE WHEN len(coalesce(region_offsets, [])) > 0 THEN region_lengths
                           ELSE [size] END) AS len
        FROM (SELECT *, row_number() OVER () AS acc FROM calls
              WHERE regexp_matches(func, '^MPI_File_i?(read|write)') AND NOT ends_with(func, '_end')
                AND error IS NULL AND file_offset IS NOT NULL AND size > 0)) a
    ASOF JOIN born b ON b.file = a.file AND a.t0 >= b.t_born
    WHERE a.len > 0
),
wr AS (  -- writes, with the furthest end written since the creation up to each (ties included)
    SELECT file, t_born, t0, lo, lo + len AS hi,
           max(lo + len) OVER (PARTITION BY file, t_born ORDER BY t0 RANGE UNBOUNDED PRECEDING) AS run_end
    FROM rng WHERE wr
),
-- each resize (all ranks' calls of one collective call): its size, and the end written before it
grow AS (
    SELECT g.*, coalesce(w.run_end, 0) AS old_end FROM (
        SELECT g.*, b.t_born FROM (
            SELECT any_value(file) AS file, func, max(size) AS size, min(t_start) AS t0, max(t_end) AS t1,
                   list(rank ORDER BY rank) AS ranks, list(callid ORDER BY rank) AS callids
            FROM calls
            WHERE func IN ('MPI_File_set_size', 'MPI_File_preallocate') AND error IS NULL AND size IS NOT NULL
            GROUP BY coll_seq, func, CASE WHEN coll_seq IS NULL THEN callid END) g
        ASOF JOIN born b ON b.file = g.file AND g.t0 >= b.t_born) g
    ASOF LEFT JOIN wr w ON w.file = g.file AND w.t_born = g.t_born AND g.t1 > w.t0
),
-- reads after a resize of bytes it added: [a, b) of the read lies in [old_end, size)
cand AS (
    SELECT row_number() OVER () AS cid, r.acc, r.rank, r.callid, r.func, r.file, r.t0, r.t1, r.t_born, r.lo,
           r.lo + r.len AS hi, greatest(r.lo, g.old_end) AS a, least(r.lo + r.len, g.size) AS b,
           g.func AS g_func, g.size, g.old_end, g.t0 AS g_t0, g.ranks AS g_ranks, g.callids AS g_callids
    FROM rng r JOIN grow g ON g.file = r.file AND g.t_born = r.t_born
    WHERE NOT r.wr AND g.size > g.old_end AND r.t0 >= g.t0 AND r.lo < g.size AND r.lo + r.len > g.old_end
),
-- the writes that started before the read ended, clipped to [a, b): the first byte none covers
cover AS (
    SELECT c.cid, c.a, greatest(w.lo, c.a) AS s, least(w.hi, c.b) AS e
    FROM cand c JOIN wr w ON w.file = c.file AND w.t_born = c.t_born
    WHERE w.t0 < c.t1 AND w.lo < c.b AND w.hi > c.a
),
gap AS (  -- by start: a write starting beyond all before it leaves a gap; else the gap is after the last
    SELECT cid, coalesce(min(prev) FILTER (WHERE s > prev), max(e)) AS first_gap
    FROM (SELECT cid, s, e, coalesce(max(e) OVER (PARTITION BY cid ORDER BY s, e
                                                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), a) AS prev
          FROM cover)
    GROUP BY cid
),
found AS (
    SELECT c.*, coalesce(g.first_gap, c.a) AS gap_at
    FROM cand c LEFT JOIN gap g USING (cid)
    WHERE coalesce(g.first_gap, c.a) < c.b
    QUALIFY row_number() OVER (PARTITION BY c.acc ORDER BY c.g_t0 DESC, c.lo) = 1
)
SELECT [coalesce(list_filter(g_ranks, lambda x: x = rank)[1], g_ranks[1]), rank] AS ranks,
       [coalesce(g_callids[list_position(g_ranks, rank)], g_callids[1]), callid] AS callids,
       [g_func, func] AS funcs, file,
       'rank ' || rank || ' reads bytes ' || lo || '-' || (hi - 1) || ' after ' || g_func || '(' || size
       || ') grew the file beyond the ' || old_end || ' bytes written to it before, so bytes ' || old_end
       || '-' || (size - 1) || ' were undefined; no write had put data at byte ' || gap_at
       || ' before the read' AS detail
FROM found
ORDER BY t0
