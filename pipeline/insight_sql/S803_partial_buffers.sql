-- family: server
-- title: flows cut into partial buffers: disk operations that fill only part of a flow buffer
-- thresholds: partial_share
-- columns: server_ops.layer, server_ops.parent, server_ops.size, server_ops.rank, server_ops.callids
-- A server moves a request's data in one flow, cut into buffers of flow_buffer bytes, one Trove
-- operation each; the pieces of a non-contiguous access are packed into the buffers (list I/O), so
-- only a flow's last buffer can be partial.  Per direction, over the flows that moved at least one
-- full buffer's worth: partial = their disk operations smaller than flow_buffer; warning when those
-- are more than partial_share of the flows' operations, info otherwise.  Extra disk operations: per
-- call set (the request's CallIDs and rank) and server, the operations of its flows beyond
-- ceil(bytes / flow_buffer), the operations the same bytes would take in one flow (a call's data is
-- cut into several requests, each a flow with its own partial buffer, by the 64 regions a request
-- carries at most, or by cycles of collective buffering).  Advised: a flow buffer the most common
-- flow fills whole (the largest power of 2 dividing its bytes, within callid run's bounds), when the
-- current one does not divide it.
WITH flows AS (
    SELECT f.server, f.event_id, f.parent, CASE f.op WHEN 'flow_read' THEN 'read' ELSE 'write' END AS direction,
           count(d.event_id) AS ops, coalesce(sum(d.size), 0)::BIGINT AS bytes,
           count(d.event_id) FILTER (WHERE d.size < getvariable('flow_buffer')) AS partial,
           coalesce(sum(d.size) FILTER (WHERE d.size < getvariable('flow_buffer')), 0)::BIGINT AS partial_bytes
    FROM server_ops f
    LEFT JOIN (SELECT * FROM disk_data SEMI JOIN (SELECT server, event_id AS parent FROM server_ops
                                                  WHERE layer = 'flow') USING (server, parent)) d
        ON d.server = f.server AND d.parent = f.event_id  -- (the flows' operations: the few joined)
    WHERE f.layer = 'flow'
    GROUP BY ALL
), reqs AS MATERIALIZED (  -- the flows' requests (a semi join first: the requests' CallIDs of these alone)
    SELECT server, event_id, rank, callids FROM server_ops
    WHERE layer = 'req' AND (server, event_id) IN (SELECT (server, parent) FROM flows)
), groups AS (  -- the flows of one call set on one server
    SELECT f.direction, f.server, r.rank, r.callids, CASE WHEN len(r.callids) = 0 THEN r.event_id END AS unstamped,
           sum(f.ops)::BIGINT AS ops, sum(f.bytes)::BIGINT AS bytes,
           (sum(f.ops) - ceil(sum(f.bytes) / getvariable('flow_buffer')))::BIGINT AS extra
    FROM flows f JOIN reqs r ON r.server = f.server AND r.event_id = f.parent
    GROUP BY ALL
    HAVING sum(f.bytes) >= getvariable('flow_buffer')
), big AS (
    SELECT * FROM flows WHERE bytes >= getvariable('flow_buffer')
), d0 AS (
    SELECT direction, count(*) AS flows, count(*) FILTER (WHERE partial > 0) AS affected,
           sum(ops)::BIGINT AS ops, sum(partial)::BIGINT AS partial, sum(bytes)::BIGINT AS bytes,
           sum(partial_bytes)::BIGINT AS partial_bytes, mode(bytes) AS common_bytes
    FROM big GROUP BY direction HAVING sum(partial) > 0
), d AS (
    SELECT *, CASE WHEN common_bytes % getvariable('flow_buffer') <> 0
                   THEN flow_divisor(common_bytes, getvariable('strip_size')) END AS advised
    FROM d0
), extra AS (
    SELECT direction, sum(extra)::BIGINT AS extra, count(*) FILTER (WHERE extra > 0) AS split_groups FROM groups
    GROUP BY direction
), top_servers AS (
    SELECT direction, list(server ORDER BY n DESC, server) AS servers
    FROM (SELECT direction, server, sum(partial) AS n FROM big WHERE partial > 0 GROUP BY ALL) GROUP BY direction
), top_ranks AS (
    SELECT direction, list(rank ORDER BY n DESC, rank) AS ranks
    FROM (SELECT b.direction, r.rank, sum(b.partial) AS n
          FROM big b JOIN reqs r ON r.server = b.server AND r.event_id = b.parent
          WHERE b.partial > 0 AND r.rank >= 0 GROUP BY ALL)
    GROUP BY direction
), top_calls AS (
    SELECT direction, list(callid ORDER BY n DESC, callid) AS callids
    FROM (SELECT b.direction, u.callid, sum(b.partial) AS n
          FROM big b JOIN reqs r ON r.server = b.server AND r.event_id = b.parent,
               unnest(r.callids) AS u(callid)
          WHERE b.partial > 0 GROUP BY ALL)
    GROUP BY direction
), top_files AS (
    SELECT direction, list(file ORDER BY n DESC, file) AS files
    FROM (SELECT b.direction, c.file, sum(b.partial) AS n
          FROM big b JOIN reqs r ON r.server = b.server AND r.event_id = b.parent
          JOIN calls c ON c.callid = r.callids[1]
          WHERE b.partial > 0 GROUP BY ALL)
    GROUP BY direction
)
SELECT CASE WHEN d.partial > getvariable('partial_share') * d.ops THEN 'warning' ELSE 'info' END AS severity,
       printf('%d of %d %s flows of a full %s buffer or more end in a partial buffer: %d of their %d disk ops (%s) '
              || 'fill %s of their buffer on average (all of them %s); %d disk ops more than the same bytes take '
              || 'in one flow per call and server (%d calls'' data on a server cut into several flows)',
              d.affected, d.flows, d.direction, format_bytes(getvariable('flow_buffer')::BIGINT), d.partial, d.ops,
              fmt_pct(d.partial / d.ops), fmt_pct(d.partial_bytes / (d.partial * getvariable('flow_buffer'))),
              fmt_pct(d.bytes / (d.ops * getvariable('flow_buffer'))), coalesce(e.extra, 0),
              coalesce(e.split_groups, 0)) AS detail,
       CASE WHEN d.partial > getvariable('partial_share') * d.ops
            THEN 'make the accesses contiguous, or of fewer, larger pieces (a request carries at most 64 '
                 || 'regions: each further one is a flow ending in a partial buffer)'
                 || CASE WHEN d.advised IS NOT NULL
                         THEN printf('; or a flow buffer the most common flow (%s) fills whole: callid run '
                                     || '--flow-buffer %s', format_bytes(d.common_bytes), size_arg(d.advised))
                         ELSE '' END END AS recommendation,
       {'direction': d.direction, 'flows': d.flows, 'flows_affected': d.affected, 'disk_ops': d.ops,
        'partial_ops': d.partial, 'partial_share': round(d.partial / d.ops, 4),
        'partial_fill_share': round(d.partial_bytes / (d.partial * getvariable('flow_buffer')), 4),
        'fill_share': round(d.bytes / (d.ops * getvariable('flow_buffer')), 4), 'extra_ops': coalesce(e.extra, 0),
        'flow_buffer_bytes': getvariable('flow_buffer')::BIGINT, 'common_flow_bytes': d.common_bytes,
        'advised_flow_buffer_bytes': CASE WHEN d.partial > getvariable('partial_share') * d.ops
                                          THEN d.advised END} AS numbers,
       coalesce(r.ranks, []) AS ranks, coalesce(c.callids, []) AS callids, coalesce(f.files, []) AS files,
       coalesce(s.servers, []) AS servers
FROM d LEFT JOIN extra e USING (direction) LEFT JOIN top_servers s USING (direction)
LEFT JOIN top_ranks r USING (direction) LEFT JOIN top_calls c USING (direction) LEFT JOIN top_files f USING (direction)
ORDER BY d.direction
