-- family: faults
-- title: a server slower than the others at the same work: its disks, its network link, or its handling of requests
-- thresholds: slow_server_factor, slow_server_share, noise_ns
-- columns: server_ops.server, server_ops.layer, server_ops.op, server_ops.t_start, server_ops.t_end, rpcs.server, rpcs.op, rpcs.t_start, rpcs.t_recv, rpcs.t_end
-- Three parts of each server's time, each compared with the other servers' on the same kind of work: its
-- disks (its disk operations' time, by operation), its network (its requests' way in, from the client's
-- send to the server's receipt, by request; and its flows' time less their disk operations', the flow
-- buffers' way, as PVFS2's flows pipeline the disk and the network, by flow; not the reply's way, which the
-- client's own work on its other requests lengthens), its handling of requests (its requests' time less
-- their flows' and their other disk operations': queues, a stall; over all its requests, as a stall holds
-- whichever come).  All from sums per server and kind (one pass over the server events, one over the
-- requests).  For each server, part and kind of work, the others' mean is the median of the other servers'
-- means on it; the server's time on the part against what it would have taken at their means: high when it
-- took slow_server_factor times as long or more and the time it lost is at least slow_server_share of the
-- time of all requests, and noise_ns, so that timing noise on a few small operations raises nothing; ok
-- when no server is slower.  One row per slow server and part, the most time lost first, naming the kind
-- of work that lost the most.
WITH ev AS (  -- per server, layer and operation: how many, how long
    SELECT server, layer, op, count(*) AS n, sum(t_end - t_start)::DOUBLE AS ns FROM server_ops
    WHERE layer IN ('req', 'flow', 'trove', 'meta') GROUP BY ALL
), per AS (  -- what is compared: (server, part, kind of work): how many, how long
    SELECT server, 'disks' AS part, op AS kind, n, ns FROM ev WHERE layer IN ('trove', 'meta')
    UNION ALL
    SELECT server, 'network', op || ' (its way in)', count(*), sum(greatest(0, t_recv - t_start))::DOUBLE
    FROM rpcs WHERE t_recv IS NOT NULL GROUP BY ALL
    UNION ALL
    SELECT f.server, 'network', f.op, f.n, greatest(0, f.ns - coalesce(d.ns, 0))
    FROM ev f LEFT JOIN ev d ON d.server = f.server AND d.layer = 'trove' AND d.op = replace(f.op, 'flow_', 'trove_')
    WHERE f.layer = 'flow'
    UNION ALL
    SELECT server, 'request handling', 'requests', sum(n) FILTER (WHERE layer = 'req'),
           greatest(0, sum(ns) FILTER (WHERE layer = 'req')
                       - coalesce(sum(ns) FILTER (WHERE layer = 'flow' OR (layer IN ('trove', 'meta')
                                                  AND op NOT IN ('trove_read', 'trove_write'))), 0))
    FROM ev GROUP BY server HAVING count(*) FILTER (WHERE layer = 'req') > 0
), per_mean AS (
    SELECT *, ns / n AS mean FROM per WHERE n > 0
), peer AS (
    SELECT a.server, a.part, a.kind, a.n, a.ns, a.mean, median(b.mean) AS peer_mean
    FROM per_mean a JOIN per_mean b ON b.part = a.part AND b.kind = a.kind AND b.server <> a.server
    GROUP BY ALL
), part AS (
    SELECT server, part, sum(n)::BIGINT AS n, sum(ns)::BIGINT AS ns, sum(n * peer_mean) AS expected,
           arg_max(kind, ns - n * peer_mean) AS kind, arg_max(mean, ns - n * peer_mean) AS kind_mean,
           arg_max(peer_mean, ns - n * peer_mean) AS kind_peer_mean
    FROM peer GROUP BY ALL
), total AS (
    SELECT coalesce(sum(t_end - t_start), 0)::BIGINT AS ns FROM rpcs
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
                    (SELECT count(DISTINCT server) FROM per_mean)),
       NULL, {'server': NULL, 'part': NULL, 'factor': NULL, 'ns': NULL, 'expected_ns': NULL, 'lost_ns': NULL,
              'lost_share': NULL, 'kind': NULL, 'operations': NULL, 'impact': NULL},
       [], [], [], []
WHERE NOT EXISTS (SELECT 1 FROM slow) AND (SELECT count(DISTINCT server) FROM per_mean) > 1
