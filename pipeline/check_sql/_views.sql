-- Views several checks share, created (as temporary views) before the checks run.

-- hint_items: one row per key=value a call passed (open, set_info, set_view, delete); call_no numbers
-- the calls, so that the items of one call (a delete: of no collective coll_seq) group together.
CREATE TEMP VIEW hint_items AS
SELECT * EXCLUDE (pair, hints), split_part(pair, '=', 1) AS key,
       trim(substr(pair, strpos(pair, '=') + 1)) AS value
FROM (SELECT rank, callid, func, file, coll_seq, t_start, hints,
             row_number() OVER (ORDER BY rank, t_start, callid) AS call_no,
             unnest(string_split(hints, ';')) AS pair
      FROM calls
      WHERE func IN ('MPI_File_open', 'MPI_File_set_info', 'MPI_File_set_view', 'MPI_File_delete')
        AND hints IS NOT NULL)
WHERE pair <> '';

-- reserved_hints: the keys MPI 3.1 13.2.8 reserves; same: marked [SAME] (every rank of a collective
-- call must pass the same value)
CREATE TEMP VIEW reserved_hints AS
SELECT * FROM (VALUES ('access_style', false), ('collective_buffering', true), ('cb_block_size', true),
                      ('cb_buffer_size', true), ('cb_nodes', true), ('chunked', true), ('chunked_item', true),
                      ('chunked_size', true), ('filename', false), ('file_perm', true),
                      ('io_node_list', true), ('nb_proc', true), ('num_io_nodes', true),
                      ('striping_factor', true), ('striping_unit', true)) t(key, same);

-- pending: what a rank leaves outstanding on a handle, and when it completed (t_done; NULL: never):
-- a non-blocking call (its rid) until its `waits` row, a successful split collective _begin until the
-- next _end on the handle (begin and end pair up in order: the real MPI-IO's split calls carry no rid)
CREATE TEMP VIEW pending AS
SELECT n.rank, n.fid, n.callid, n.func, n.t_start, 'not waited for' AS why,
       (SELECT min(w.t_start) FROM waits w WHERE w.rank = n.rank AND w.rid = n.rid) AS t_done
FROM calls n WHERE starts_with(n.func, 'MPI_File_i') AND n.rid IS NOT NULL
UNION ALL
SELECT b.rank, b.fid, b.callid, b.func, b.t_start, 'not ended',
       (SELECT min(e.t_start) FROM calls e WHERE e.rank = b.rank AND e.fid = b.fid
          AND ends_with(e.func, '_end') AND e.t_start > b.t_start)
FROM calls b WHERE ends_with(b.func, '_begin') AND b.error IS NULL;

-- conflicts(atomic_mode): D502's and D503's findings (pipeline/check_sql/D502_consistency_race.sql says
-- how): with atomic_mode false, pairs not both in atomic mode on one open, unordered by sync-barrier-sync;
-- true, pairs both in atomic mode on one open, unordered by any barrier (no sync needed).
CREATE TEMP MACRO conflicts(atomic_mode) AS TABLE
WITH
-- when a non-blocking or split call completed: its wait, or the _end call
done AS (
    SELECT rank, rid, min(t_end) AS t_done FROM (
        SELECT rank, rid, t_end FROM waits WHERE rid IS NOT NULL
        UNION ALL
        SELECT rank, rid, t_end FROM calls
        WHERE ends_with(func, '_end') AND rid IS NOT NULL AND error IS NULL)
    GROUP BY rank, rid
),
-- every handle: its collective open (group, communicator)
opened AS MATERIALIZED (
    SELECT rank, fid, callid, coll_seq >> 20 AS grp, comm_id
    FROM calls WHERE func = 'MPI_File_open' AND error IS NULL AND coll_seq IS NOT NULL
),
-- handles on callid's simulated file system: its open, sync and close end in a barrier of the group
sim AS MATERIALIZED (
    SELECT DISTINCT o.grp FROM opened o SEMI JOIN rpcs r ON r.callid = o.callid AND r.rank = o.rank
),
-- the data accesses that moved data, each outstanding from t0 to t1 (its completion)
acc AS (
    SELECT row_number() OVER () AS aid, c.rank, c.fid, c.file, c.callid, c.func,
           contains(c.func, 'write') AS wr,
           c.t_start AS t0, coalesce(d.t_done, c.t_end) AS t1, c.file_offset, c.size,
           c.region_offsets AS ro, c.region_lengths AS rl
    FROM calls c LEFT JOIN done d ON d.rank = c.rank AND d.rid = c.rid
    WHERE regexp_matches(c.func, '^MPI_File_i?(read|write)') AND NOT ends_with(c.func, '_end')
      AND c.error IS NULL AND c.file_offset IS NOT NULL AND c.size > 0
),
rel_pt AS (  -- what ends a sequence of the handle (its writes reach storage)
    SELECT rank, fid, t_start, t_end FROM calls
    WHERE func IN ('MPI_File_sync', 'MPI_File_close') AND error IS NULL
),
acq_pt AS (  -- what starts a sequence of the handle (others' stored writes become visible)
    SELECT rank, fid, t_start, t_end FROM calls
    WHERE func IN ('MPI_File_sync', 'MPI_File_open') AND error IS NULL
),
atom AS (
    SELECT rank, fid, t_end, atomicity FROM calls WHERE func = 'MPI_File_set_atomicity' AND error IS NULL
),
-- each access: its handle's first sync/close after it (rel_t), last sync/open before it (acq_t),
-- its atomic mode
acc2 AS MATERIALIZED (
    SELECT a.*, r.t_end AS rel_t, q.t_start AS acq_t, coalesce(s.atomicity, false) AS atom,
           o.grp, o.comm_id AS hcomm, o.grp IN (SELECT grp FROM sim) AS on_sim
    FROM acc a
    ASOF LEFT JOIN rel_pt r ON r.rank = a.rank AND r.fid = a.fid AND r.t_start >= a.t1
    ASOF LEFT JOIN acq_pt q ON q.rank = a.rank AND q.fid = a.fid AND a.t0 >= q.t_end
    ASOF LEFT JOIN atom s ON s.rank = a.rank AND s.fid = a.fid AND a.t0 >= s.t_end
    LEFT JOIN opened o ON o.rank = a.rank AND o.fid = a.fid
    WHERE NOT atomic_mode OR coalesce(s.atomicity, false)  -- (atomic mode's pairs: of its accesses alone)
),
-- the synchronising instances, numbered k alike on every rank: the collective calls of a
-- communicator (the k-th on it), and the open/sync/close calls of a simulated file over one
-- communicator (the k-th of them on that file and communicator)
bar AS MATERIALIZED (
    SELECT rank, 'c' || comm_id AS c, NULL AS file, NULL::BIGINT AS comm_id,
           row_number() OVER (PARTITION BY rank, comm_id ORDER BY t_start) AS k, t_start, t_end
    FROM mpi_calls WHERE collective IS NOT FALSE
    UNION ALL
    SELECT rank, 'f' || comm_id || ':' || file, file, comm_id,
           row_number() OVER (PARTITION BY rank, file, comm_id ORDER BY t_start), t_start, t_end
    FROM calls
    WHERE func IN ('MPI_File_open', 'MPI_File_sync', 'MPI_File_close') AND error IS NULL
      AND coll_seq >> 20 IN (SELECT grp FROM sim)
),
mem AS (SELECT DISTINCT rank, c, file, comm_id FROM bar),
-- per access and synchronising sequence c: rel = the first instance its rank enters after the
-- access is stored (after rel_t; for the file's own open/sync/close: after the access), acq = the
-- last instance its rank leaves before the access sees stored data (before acq_t; own file: before it)
-- A read that comes first needs no sync after it, nor the write after it a sync before: nothing of the
-- read has to reach storage, nothing of another's write has to become visible to the write.  So a
-- read is released when it ends, and a write has a second acquire (ar) at its own start, for pairs
-- whose first access is a read.
ep1 AS (
    SELECT a.aid, m.c,
           CASE WHEN m.file IS NULL AND a.wr THEN a.rel_t ELSE a.t1 END AS rel_from,
           CASE WHEN m.file IS NULL THEN a.acq_t ELSE a.t0 END AS acq_to, a.t0, a.t1, a.rank
    FROM acc2 a JOIN mem m ON m.rank = a.rank
    WHERE m.file IS NULL OR (m.file = a.file AND m.comm_id = a.hcomm AND a.on_sim)
),
ep AS (
    SELECT e.aid, list({'c': e.c, 'a': coalesce(q.k, 0), 'ar': coalesce(p.k, 0),
                        'r': coalesce(s.k, 9223372036854775807), 'r0': coalesce(s0.k, 9223372036854775807)}
                       ORDER BY e.c) AS ep
    FROM ep1 e
    ASOF LEFT JOIN bar s ON s.rank = e.rank AND s.c = e.c AND s.t_start >= e.rel_from
    ASOF LEFT JOIN bar s0 ON s0.rank = e.rank AND s0.c = e.c AND s0.t_start >= e.t1
    ASOF LEFT JOIN bar q ON q.rank = e.rank AND q.c = e.c AND e.acq_to >= q.t_end
    ASOF LEFT JOIN bar p ON p.rank = e.rank AND p.c = e.c AND e.t0 >= p.t_end
    GROUP BY e.aid
),
-- accesses of one rank that are alike for the race (file, write or read, open group, atomic mode,
-- synchronisation) form a class; its byte ranges are merged
-- (ordered by a hash of ep where no two distinct eps share one, checked: sorting by the lists took 3x as long)
ep_hashed AS (SELECT count(DISTINCT ep) = count(DISTINCT hash(ep)) AS one_to_one FROM ep),
acc3 AS MATERIALIZED (  -- (what the classes need: the whole rows sorted took twice as long)
    SELECT a.aid, a.file, a.rank, a.wr, a.grp, a.atom, a.file_offset, a.size, a.ro, a.rl,
           coalesce(e.ep, []) AS ep,
           dense_rank() OVER (ORDER BY a.file, a.rank, a.wr, a.grp, a.atom,
                              CASE WHEN h.one_to_one THEN hash(coalesce(e.ep, [])) END,
                              CASE WHEN NOT h.one_to_one THEN coalesce(e.ep, []) END) AS cls,
           dense_rank() OVER (ORDER BY a.file) AS fidx
    FROM acc2 a LEFT JOIN ep e USING (aid), ep_hashed h
),
rng AS (
    SELECT cls, lo, max(lo + len) AS hi, arg_max(aid, lo + len) AS aid FROM (
        SELECT cls, aid,
               unnest(CASE WHEN len(coalesce(ro, [])) > 0 THEN ro ELSE [file_offset] END) AS lo,
               unnest(CASE WHEN len(coalesce(ro, [])) > 0 THEN rl ELSE [size] END) AS len
        FROM acc3)
    WHERE len > 0
    GROUP BY cls, lo
),
-- by offset in each class: the access reaching furthest so far (it covers every byte from lo below run_hi)
run AS MATERIALIZED (
    SELECT cls, lo, max(hi) OVER w AS run_hi, arg_max(aid, hi) OVER w AS run_aid,
           max(hi) OVER (PARTITION BY cls ORDER BY lo ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
               AS prev_hi
    FROM rng WINDOW w AS (PARTITION BY cls ORDER BY lo ROWS UNBOUNDED PRECEDING)
),
merged AS (
    SELECT cls, min(lo) AS lo, max(run_hi) AS hi FROM (
        SELECT *, sum(CASE WHEN prev_hi IS NULL OR lo > prev_hi THEN 1 ELSE 0 END)
                  OVER (PARTITION BY cls ORDER BY lo ROWS UNBOUNDED PRECEDING) AS island
        FROM run)
    GROUP BY cls, island
),
-- The candidate pairs: byte ranges that overlap, whose classes may run concurrently in the
-- synchronisation sequence most accesses of the file take part in (the epoch [a, r): between the
-- last instance before they acquire and the first after they release).  Each range is at a level
-- in both dimensions (2^L >= its length; a range spans at most 2 buckets, offset >> L, of its own
-- level and of any higher one), and two intervals that overlap share a bucket at the level of the
-- longer one: four hash joins on (file, levels, buckets), by which range is the longer in each
-- dimension, find every such pair once (in the buckets of the overlap's start), never all pairs of
-- a file or of a synchronisation epoch.
mainc AS (
    SELECT fidx, arg_max(c, n) AS c FROM (
        SELECT fidx, u.c, count(*) AS n FROM (SELECT fidx, unnest(ep) AS u FROM acc3) GROUP BY ALL)
    GROUP BY fidx
),
isl AS MATERIALIZED (
    SELECT m.cls, m.lo, m.hi, k.fidx, k.file, k.rank, k.wr, k.grp, k.atom, k.ep,
           CAST(ceil(log2(m.hi - m.lo)) AS INTEGER) AS lb, e.ea, e.er,
           CAST(ceil(log2(greatest(e.er - e.ea, 1))) AS INTEGER) AS le
    FROM merged m JOIN (SELECT DISTINCT cls, fidx, file, rank, wr, grp, atom, ep FROM acc3) k USING (cls)
    LEFT JOIN mainc mc USING (fidx),
    LATERAL (SELECT CASE WHEN atomic_mode THEN x.ar ELSE x.a END AS ea,
                    CASE WHEN atomic_mode THEN x.r0 ELSE x.r END AS er
             FROM (SELECT coalesce(list_filter(k.ep, lambda x: x.c = mc.c)[1],
                                   {'c': NULL, 'a': 0, 'ar': 0, 'r': 9223372036854775807,
                                    'r0': 9223372036854775807}) AS x)) AS e
),
-- each range at every level of the file's ranges at or above its own, in both dimensions
emit AS MATERIALIZED (
    SELECT *, unnest(range(ea >> m, ((er - 1) >> m) + 1)) AS be FROM (
        SELECT i.*, l.lb AS ml, n.le AS m, l.lb = i.lb AS bown, n.le = i.le AS eown,
               unnest(range(i.lo >> l.lb, ((i.hi - 1) >> l.lb) + 1)) AS bb
        FROM isl i
        JOIN (SELECT DISTINCT fidx, lb FROM isl) l ON l.fidx = i.fidx AND l.lb >= i.lb
        JOIN (SELECT DISTINCT fidx, le FROM isl) n ON n.fidx = i.fidx AND n.le >= i.le)
),
-- a: a write range, b: a range of another rank, at the levels of the longer in each dimension
cand AS (
    SELECT a.*, b AS o FROM emit a JOIN emit b USING (fidx, ml, m, bb, be)
    WHERE a.wr AND a.bown AND a.eown AND b.lb <= a.lb AND b.le <= a.le
      AND a.rank <> b.rank
    UNION ALL
    SELECT a.*, b AS o FROM emit a JOIN emit b USING (fidx, ml, m, bb, be)
    WHERE a.wr AND b.bown AND b.eown AND a.lb < b.lb AND a.le < b.le
      AND a.rank <> b.rank
    UNION ALL
    SELECT a.*, b AS o FROM emit a JOIN emit b USING (fidx, ml, m, bb, be)
    WHERE a.wr AND a.bown AND b.eown AND b.lb <= a.lb AND a.le < b.le
      AND a.rank <> b.rank
    UNION ALL
    SELECT a.*, b AS o FROM emit a JOIN emit b USING (fidx, ml, m, bb, be)
    WHERE a.wr AND b.bown AND a.eown AND a.lb < b.lb AND b.le <= a.le
      AND a.rank <> b.rank
),
-- racing: not two writes counted twice, not both atomic on one open, and in no synchronising
-- sequence of both ranks is one released before the other acquires
race AS (  -- a pair of ranks once, at its first racing byte
    SELECT file, r1, r2, f.x AS x, f.ca AS ca, f.cb AS cb FROM (
        SELECT file, least(rank, o.rank) AS r1, greatest(rank, o.rank) AS r2,
               min({'x': greatest(lo, o.lo), 'ca': cls, 'cb': o.cls}) AS f
        FROM cand
        WHERE lo < o.hi AND o.lo < hi AND ea < o.er AND o.ea < er
          AND greatest(lo, o.lo) >> ml = bb AND greatest(ea, o.ea) >> m = be
          AND (NOT o.wr OR rank < o.rank) AND (atom AND o.atom AND grp = o.grp) = atomic_mode
          AND NOT coalesce(list_bool_or(list_transform(ep, lambda x: coalesce(list_bool_or(list_transform(
                  o.ep, lambda y: y.c = x.c AND CASE WHEN atomic_mode THEN x.r0 <= y.ar OR y.r0 <= x.ar
                      ELSE x.r <= y.a OR y.r <= CASE WHEN o.wr THEN x.a ELSE x.ar END END)),
                  false))), false)
        GROUP BY ALL)
),
-- per file: how many pairs of ranks race, which ranks; the first few pairs (by racing byte) shown
totals AS (
    SELECT file, count(*) AS pairs, (SELECT list(DISTINCT r ORDER BY r) FROM unnest(list(r1) || list(r2)) t(r))
           AS ranks
    FROM race GROUP BY file
),
shown AS (  -- (the 3 least by an aggregate: numbering every pair of a file took most of the time)
    SELECT file, k, p.x AS x, p.r1 AS r1, p.r2 AS r2, p.ca AS ca, p.cb AS cb FROM (
        SELECT file, unnest(top) AS p, generate_subscripts(top, 1) AS k FROM (
            SELECT file, min_by({'x': x, 'r1': r1, 'r2': r2, 'ca': ca, 'cb': cb}, {'x': x, 'r1': r1, 'r2': r2}, 3)
                       AS top
            FROM race GROUP BY file))
),
-- the accesses covering the first racing byte in each of the two classes
pick AS (
    SELECT r.file, r.k, r.x, ra.run_aid AS aid_a, rb.run_aid AS aid_b
    FROM shown r
    ASOF JOIN run ra ON ra.cls = r.ca AND r.x >= ra.lo
    ASOF JOIN run rb ON rb.cls = r.cb AND r.x >= rb.lo
),
pair AS (  -- e: the one that started first, l: the other
    SELECT p.file, p.k, p.x,
           CASE WHEN a.t0 <= b.t0 THEN a ELSE b END AS e, CASE WHEN a.t0 <= b.t0 THEN b ELSE a END AS l
    FROM pick p JOIN acc2 a ON a.aid = p.aid_a JOIN acc2 b ON b.aid = p.aid_b
),
pair2 AS MATERIALIZED (  -- the byte range of each call that holds x, and where the two meet
    SELECT *, least(e_r[1] + e_r[2], l_r[1] + l_r[2]) AS x_end FROM (
    SELECT *, list_filter(list_zip(e_lo, e_len), lambda z: z[1] <= x AND x < z[1] + z[2])[1] AS e_r,
           list_filter(list_zip(l_lo, l_len), lambda z: z[1] <= x AND x < z[1] + z[2])[1] AS l_r
    FROM (SELECT *,
                 CASE WHEN len(coalesce(e.ro, [])) > 0 THEN e.ro ELSE [e.file_offset] END AS e_lo,
                 CASE WHEN len(coalesce(e.ro, [])) > 0 THEN e.rl ELSE [e.size] END AS e_len,
                 CASE WHEN len(coalesce(l.ro, [])) > 0 THEN l.ro ELSE [l.file_offset] END AS l_lo,
                 CASE WHEN len(coalesce(l.ro, [])) > 0 THEN l.rl ELSE [l.size] END AS l_len
          FROM pair))
),
-- the disk operations of each of the two calls (each side first: an operation of one call against all
-- of another's is never formed), then those on the same datafile of the same server and the same bytes
ops_e AS MATERIALIZED (
    SELECT p.e.aid AS aid_e, p.l.aid AS aid_l, p.x, p.x_end, a.server, a.handle, a.op, a.event_id,
           a.disk_offset, a.size, a.file_offset, a.file_end
    FROM pair2 p JOIN arrows a ON a.callid = p.e.callid WHERE a.layer = 'trove' AND a.size > 0
),
ops_l AS MATERIALIZED (
    SELECT p.e.aid AS aid_e, p.l.aid AS aid_l, a.server, a.handle, a.op, a.event_id,
           a.disk_offset, a.size, a.file_offset, a.file_end
    FROM pair2 p JOIN arrows a ON a.callid = p.l.callid WHERE a.layer = 'trove' AND a.size > 0
),
disk AS (
    SELECT aid_e, aid_l,
           arg_min({'server': da.server, 'handle': da.handle, 'op_a': da.op, 'ev_a': da.event_id,
                    'op_b': db.op, 'ev_b': db.event_id,
                    'lo': greatest(da.disk_offset, db.disk_offset),
                    'hi': least(da.disk_offset + da.size, db.disk_offset + db.size)},
                   (da.server, greatest(da.disk_offset, db.disk_offset), da.event_id, db.event_id)) AS d
    FROM ops_e da JOIN ops_l db USING (aid_e, aid_l, server, handle)
    WHERE da.disk_offset < db.disk_offset + db.size AND db.disk_offset < da.disk_offset + da.size
      AND (da.file_offset IS NULL OR da.file_offset < da.x_end AND da.file_end > da.x)
      AND (db.file_offset IS NULL OR db.file_offset < da.x_end AND db.file_end > da.x)
    GROUP BY aid_e, aid_l
),
logged AS (
    SELECT DISTINCT aid_e, aid_l FROM ops_e UNION SELECT DISTINCT aid_e, aid_l FROM ops_l
),
-- each pair shown in words
said AS (
SELECT p.file, p.k, p.x, e, l,
       'rank ' || e.rank || ' ' || (CASE WHEN e.wr THEN 'writes' ELSE 'reads' END) || ' bytes '
       || e_r[1] || '-' || (e_r[1] + e_r[2] - 1) || ' and rank ' || l.rank || ' '
       || (CASE WHEN l.wr THEN 'writes' ELSE 'reads' END) || ' bytes ' || l_r[1] || '-'
       || (l_r[1] + l_r[2] - 1) || ' (overlap from byte ' || x || ' to ' || (x_end - 1) || ') '
       || (CASE WHEN atomic_mode THEN 'in atomic mode' WHEN e.atom AND l.atom THEN 'through separate opens'
                ELSE 'in nonatomic mode' END) || ', '
       || (CASE WHEN l.t0 < e.t1 THEN 'at the same time'
                WHEN atomic_mode THEN 'with no barrier of both ranks between them'
                WHEN e.rel_t IS NULL OR e.rel_t > l.t0
                THEN 'and rank ' || e.rank || ' does not sync (or close) the file between them'
                WHEN l.acq_t IS NULL OR l.acq_t < e.t1
                THEN 'and rank ' || l.rank || ' does not sync (or open) the file between them'
                ELSE 'with no barrier of both ranks between rank ' || e.rank || '''s sync after its call'
                     || ' and rank ' || l.rank || '''s sync (or open) before its own' END)
       || '; on disk: ' || coalesce(
            CASE WHEN d.d.ev_a = d.d.ev_b
                 THEN 'the same ' || d.d.op_a || ' ' || d.d.ev_a || ' on ' || d.d.server
                      || ' serves both calls'
                 ELSE (CASE WHEN e.wr AND l.wr THEN 'both write'
                            WHEN e.wr THEN 'one writes and the other reads'
                            ELSE 'one reads and the other writes' END)
                      || ' bytes ' || d.d.lo || '-' || (d.d.hi - 1) || ' of datafile ' || d.d.handle || ' on '
                      || d.d.server || ' (' || d.d.op_a || ' ' || d.d.ev_a || ' / ' || d.d.op_b || ' '
                      || d.d.ev_b || ')' END,
            CASE WHEN g.aid_e IS NOT NULL THEN 'no disk operation of the two touches the same bytes'
                 ELSE 'none logged (not on callid''s file system)' END) AS detail
FROM (SELECT file, k, x, x_end, e, l, e_r, l_r FROM pair2) p
LEFT JOIN disk d ON d.aid_e = p.e.aid AND d.aid_l = p.l.aid
LEFT JOIN logged g ON g.aid_e = p.e.aid AND g.aid_l = p.l.aid
)
-- one finding per file: its first pair in words, with (when more race) how many, which ranks, the next
SELECT CASE WHEN t.pairs = 1 THEN [s.e.rank, s.l.rank] ELSE t.ranks END AS ranks,
       [s.e.callid, s.l.callid] AS callids, [s.e.func, s.l.func] AS funcs, s.file,
       CASE WHEN t.pairs = 1 THEN s.detail
            ELSE printf('%d pairs of ranks race on this file (%d ranks); the first: ', t.pairs, len(t.ranks))
                 || s.detail || coalesce('; next: ' || (
                     SELECT string_agg(printf('ranks %d and %d from byte %d', least(n.e.rank, n.l.rank),
                                              greatest(n.e.rank, n.l.rank), n.x), ', ' ORDER BY n.k)
                     FROM said n WHERE n.file = s.file AND n.k > 1), '') END AS detail
FROM said s JOIN totals t USING (file)
WHERE s.k = 1
ORDER BY s.file;
