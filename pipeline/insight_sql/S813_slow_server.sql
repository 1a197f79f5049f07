-- family: faults
-- title: a server slower than the others at the same work: its disks, its network link, or its handling of requests
-- thresholds: slow_server_factor, slow_server_share, noise_ns
-- columns: server_ops.server, server_ops.layer, server_ops.op, server_ops.rank, server_ops.req_id, server_ops.t_start, server_ops.t_end, rpcs.server, rpcs.req_seq, rpcs.t_start, rpcs.t_end
-- Three parts of each server's time, each compared with the other servers' on the same kind of work: its
-- disks (each disk operation's time, by operation), its network (each request's way in, from its client's
-- send to the server's receipt, and its flows' time less its disk operations': the flow buffers' way, as
-- PVFS2's flows pipeline the disk and the network; by request; not the reply's way, which the client's own
-- work on its other requests lengthens), its handling of requests (each request's time at the server less
-- its flows' and disk operations': queues, a stall; over all its requests, as a stall holds whichever
-- come).  For each server, part and kind of work, the others' mean is the median of the other servers'
-- means on it; the server's time on the part against what it
-- would have taken at their means: high when it took slow_server_factor times as long or more and the time
-- it lost is at least slow_server_share of the time of all requests, and noise_ns, so that timing noise on a
-- few small operations raises nothing; ok when no server is slower.  One row per slow server and part, the
-- most time lost first, naming the kind of work that lost the most.
WITH req AS (  -- each request, at its server and at its client
    SELECT s.server, s.op, s.rank, s.req_id, s.t_end - s.t_start AS at_server, r.t_end - r.t_start AS at_client,
           r.t_recv - r.t_start AS way_in
    FROM server_ops s JOIN rpcs r ON r.rank = s.rank AND r.req_seq = s.req_id AND r.server = s.server
    WHERE s.layer = 'req'
), disk AS (
    SELECT server, rank, req_id, op, t_end - t_start AS ns FROM server_ops WHERE layer IN ('trove', 'meta')
), inside AS (  -- per request: its disk operations' and its flows' time
    SELECT server, rank, req_id, coalesce(sum(t_end - t_start) FILTER (WHERE layer IN ('trove', 'meta')), 0) AS disk,
           coalesce(sum(t_end - t_start) FILTER (WHERE layer = 'flow'), 0) AS flow
    FROM server_ops WHERE layer IN ('trove', 'meta', 'flow') GROUP BY ALL
), units AS (  -- what is compared: (server, part, kind of work, time)
    SELECT server, 'disks' AS part, op AS kind, ns FROM disk
    UNION ALL
    SELECT q.server, 'network', q.op, greatest(0, q.way_in) + greatest(0, coalesce(i.flow - i.disk, 0))
    FROM req q LEFT JOIN inside i USING (server, rank, req_id)
    UNION ALL
    SELECT q.server, 'request handling', 'requests', greatest(0, q.at_server - coalesce(greatest(i.flow, i.disk), 0))
    FROM req q LEFT JOIN inside i USING (server, rank, req_id)
), per AS (
    SELECT server, part, kind, count(*) AS n, sum(ns) AS ns, avg(ns) AS mean FROM units GROUP BY ALL
), peer AS (
    SELECT a.server, a.part, a.kind, a.n, a.ns, a.mean, median(b.mean) AS peer_mean
    FROM per a JOIN per b ON b.part = a.part AND b.kind = a.kind AND b.server <> a.server
    GROUP BY ALL
), part AS (
    SELECT server, part, sum(n)::BIGINT AS n, sum(ns)::BIGINT AS ns, sum(n * peer_mean) AS expected,
           arg_max(kind, ns - n * peer_mean) AS kind, arg_max(mean, ns - n * peer_mean) AS kind_mean,
           arg_max(peer_mean, ns - n * peer_mean) AS kind_peer_mean
    FROM peer GROUP BY ALL
), total AS (
    SELECT coalesce(sum(at_client), 0)::BIGINT AS ns FROM req
), slow AS (
    SELECT p.*, (p.ns - p.expected)::BIGINT AS lost, p.ns / nullif(p.expected, 0) AS factor, t.ns AS total_ns
    FROM part p, total t
    WHERE p.ns >= getvariable('slow_server_factor') * p.expected
      AND p.ns - p.expected >= greatest(getvariable('slow_server_share') * t.ns, getvariable('noise_ns'))
)
SELECT 'high' AS severity,
       printf('%s: its %s took %.1fx as long as the other servers'' on the same work (%s against %s: %s lost, %s '
              || 'of the %s of all requests); most on %s (%s each on average, the others %s)',
              server, part, factor, fmt_ns(ns), fmt_ns(expected), fmt_ns(lost), fmt_pct(lost / total_ns),
              fmt_ns(total_ns), kind, fmt_ns(kind_mean), fmt_ns(kind_peer_mean)) AS detail,
       CASE part
           WHEN 'disks' THEN printf('look at %s''s storage (a failing or shared device, another job''s I/O); '
                                    || 'meanwhile keep new files off it (a striping_factor hint below the '
                                    || 'server count) or move its files', server)
           WHEN 'network' THEN printf('look at %s''s network link (errors, a slow or congested port, its '
                                      || 'switch): its requests and replies take long on the way', server)
           ELSE printf('%s held its requests with no disk operation under way (a stall, a full queue, another '
                       || 'load on the server): look at its logs and its load at those times', server) END
           AS recommendation,
       {'server': server, 'part': part, 'factor': round(factor, 2), 'ns': ns, 'expected_ns': expected::BIGINT,
        'lost_ns': lost, 'lost_share': round(lost / total_ns, 4), 'kind': kind, 'operations': n,
        'impact': round(lost / total_ns, 4)} AS numbers,
       []::INTEGER[] AS ranks, []::UBIGINT[] AS callids, []::VARCHAR[] AS files, [server] AS servers
FROM (SELECT * FROM slow ORDER BY lost DESC, server, part)
UNION ALL
SELECT 'ok', printf('no server slower than the others at the same work (%d servers compared)',
                    (SELECT count(DISTINCT server) FROM per)),
       NULL, {'server': NULL, 'part': NULL, 'factor': NULL, 'ns': NULL, 'expected_ns': NULL, 'lost_ns': NULL,
              'lost_share': NULL, 'kind': NULL, 'operations': NULL, 'impact': NULL},
       [], [], [], []
WHERE NOT EXISTS (SELECT 1 FROM slow) AND (SELECT count(DISTINCT server) FROM per) > 1
