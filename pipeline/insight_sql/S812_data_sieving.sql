-- family: server
-- title: data sieving: independent calls that moved more than their data (holes read and written back)
-- thresholds: rmw_share
-- columns: arrows.holes, arrows.rmw, arrows.size, arrows.t_start, arrows.t_end, calls.collective, calls.size, calls.hints
-- ROMIO's data sieving serves an independent non-contiguous access with one contiguous one over the extent
-- its pieces span: a read reads the holes between them too; a write reads the extent (read-modify-write,
-- arrows.rmw), changes its pieces and writes the extent back whole.  The holes are the disk operations'
-- bytes no call owns (server_ops.holes; known where the run said whose bytes are where: a run on the MPI
-- library).  Per direction of the independent calls with holes: their data, the disk bytes, the holes and
-- the read-back, and the disk time of the read-back; warning when the holes are more than rmw_share of the
-- disk bytes, info below.
WITH sieved AS (  -- the independent calls whose disk data operations had holes
    SELECT DISTINCT a.callid FROM arrows a JOIN calls c USING (callid)
    WHERE a.op IN ('trove_read', 'trove_write') AND (a.holes > 0 OR a.rmw) AND c.collective IS NOT TRUE
), ops AS (  -- each disk data operation of those calls once, with its call's direction
    SELECT a.server, a.event_id, any_value(a.size) AS size, any_value(a.holes) AS holes,
           bool_or(a.rmw) AS rmw, any_value(a.t_end - a.t_start) AS ns,
           CASE WHEN any_value(c.func) LIKE '%write%' THEN 'write' ELSE 'read' END AS dir,
           any_value(a.file) AS file, any_value(c.rank) AS rank
    FROM arrows a SEMI JOIN sieved USING (callid) JOIN calls c USING (callid)
    WHERE a.op IN ('trove_read', 'trove_write')
    GROUP BY a.server, a.event_id
), t AS (
    SELECT o.dir, count(*) AS ops, sum(o.size)::BIGINT AS disk, sum(o.holes)::BIGINT AS holes,
           coalesce(sum(o.size) FILTER (WHERE o.rmw), 0)::BIGINT AS read_back,
           coalesce(sum(o.ns) FILTER (WHERE o.rmw), 0)::BIGINT AS read_back_ns, sum(o.ns)::BIGINT AS disk_ns,
           list(DISTINCT o.file) AS files, list(DISTINCT o.rank) AS ranks, list(DISTINCT o.server) AS servers
    FROM ops o
    GROUP BY o.dir
), data AS (
    SELECT CASE WHEN c.func LIKE '%write%' THEN 'write' ELSE 'read' END AS dir, count(*) AS calls,
           sum(c.size)::BIGINT AS data, list(c.callid ORDER BY c.size DESC, c.callid) AS callids
    FROM calls c JOIN sieved USING (callid) GROUP BY 1
)
SELECT CASE WHEN t.holes > getvariable('rmw_share') * t.disk THEN 'warning' ELSE 'info' END AS severity,
       printf('data sieving, %s: %d independent calls of %s moved %s on disk (%d ops): %s of holes (%s)', t.dir,
              d.calls, format_bytes(d.data), format_bytes(t.disk), t.ops, format_bytes(t.holes),
              fmt_pct(t.holes / nullif(t.disk, 0)))
       || CASE WHEN t.read_back > 0 THEN printf('; read back before writing: %s in %s of disk time (%s of it)',
                                                format_bytes(t.read_back), fmt_ns(t.read_back_ns),
                                                fmt_pct(t.read_back_ns / nullif(t.disk_ns, 0)))
               ELSE '' END AS detail,
       CASE WHEN t.holes > getvariable('rmw_share') * t.disk
            THEN printf('access the pieces collectively (MPI_File_%s_all: the aggregators move only data), or '
                        || 'turn data sieving off for sparse pieces (romio_ds_%s=disable), or lay each rank''s '
                        || 'pieces out contiguously', t.dir, t.dir) END AS recommendation,
       {'calls': d.calls, 'data_bytes': d.data, 'disk_bytes': t.disk, 'disk_ops': t.ops, 'hole_bytes': t.holes,
        'read_back_bytes': t.read_back, 'read_back_ns': t.read_back_ns, 'disk_ns': t.disk_ns,
        'hole_share': round(t.holes / nullif(t.disk, 0), 4)} AS numbers,
       list_sort(t.ranks)::INTEGER[] AS ranks, d.callids, list_sort(t.files) AS files,
       list_sort(t.servers)::VARCHAR[] AS servers
FROM t JOIN data d USING (dir)
ORDER BY t.dir DESC
