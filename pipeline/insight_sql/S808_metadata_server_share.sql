-- family: server
-- title: the metadata server's share of the servers' requests and busy time, and how long its requests take
-- thresholds: meta_share, slow_meta_ns, noise_ns
-- columns: server_ops.layer, server_ops.op, server_ops.server, server_ops.rank, server_ops.t_start, server_ops.t_end, arrows.file
-- The requests (layer 'req' events) the metadata servers served (lookup, getattr, create, remove,
-- shared_fp: opens, deletes, shared file pointers, views) against those of all servers, and their busy
-- time (server_busy: the union of each server's disk operations' intervals) against all servers' (summed).  Warning when both shares are
-- above meta_share; info otherwise.  Both, because each alone misleads: a collective moves its data in
-- a few large requests (one create is then a third of the requests), and on a short run one slow
-- sqlite commit of the metadata server is a large part of the busy time.  High when its requests take
-- slow_meta_ns or more on average and it has more than meta_share of the busy time, and that busy time
-- is noise_ns or more: a slow (loaded) metadata server, whatever the share of its requests, that cost
-- the run more than a short run's noise (one create's fsync behind other processes' writes takes
-- 10 ms or more on a loaded machine).
WITH reqs AS (
    SELECT server, op, rank, t_start, t_end, server IN (SELECT server FROM meta_servers) AS meta
    FROM server_ops WHERE layer = 'req'
), busy AS (
    SELECT coalesce(sum(busy_ns) FILTER (WHERE server IN (SELECT server FROM meta_servers)), 0)::BIGINT
               AS meta_busy, coalesce(sum(busy_ns), 0)::BIGINT AS busy
    FROM server_busy
), t AS (
    SELECT count(*) AS requests, count(*) FILTER (WHERE meta) AS meta_requests,
           avg(t_end - t_start) FILTER (WHERE meta) AS meta_mean,
           count(*) FILTER (WHERE meta AND op = 'lookup') AS lookup,
           count(*) FILTER (WHERE meta AND op = 'getattr') AS getattr,
           count(*) FILTER (WHERE meta AND op = 'create') AS "create",
           count(*) FILTER (WHERE meta AND op = 'remove') AS remove,
           count(*) FILTER (WHERE meta AND op = 'shared_fp') AS shared_fp,
           (SELECT string_agg(op || ' ' || n, ', ' ORDER BY n DESC, op)
            FROM (SELECT op, count(*) AS n FROM reqs WHERE meta GROUP BY op)) AS by_op
    FROM reqs
), top_ranks AS (
    SELECT list(rank ORDER BY n DESC, rank) AS ranks
    FROM (SELECT rank, count(*) AS n FROM reqs WHERE meta AND rank >= 0 GROUP BY rank)
), top_files AS (  -- the files of the metadata servers' operations
    SELECT list(file ORDER BY n DESC, file) AS files
    FROM (SELECT file, count(DISTINCT (server, event_id)) AS n FROM arrows
          WHERE server IN (SELECT server FROM meta_servers) AND file IS NOT NULL GROUP BY file)
), top_servers AS (
    SELECT list(server ORDER BY n DESC, server) AS servers
    FROM (SELECT server, count(*) AS n FROM reqs WHERE meta GROUP BY server)
)
SELECT CASE WHEN slow THEN 'high' WHEN flagged THEN 'warning' ELSE 'info' END AS severity,
       printf('the metadata server served %d of the %d requests (%s: %s), %s each on average, and %s of the '
              || 'servers'' busy time (%s of %s summed over the servers)', meta_requests, requests,
              fmt_pct(meta_requests / requests), by_op, fmt_ns(meta_mean), fmt_pct(meta_busy / nullif(busy, 0)),
              fmt_ns(meta_busy), fmt_ns(busy)) AS detail,
       CASE WHEN slow
            THEN 'the metadata server is slow: look at its load (other jobs'' opens and creates) and its '
                 || 'storage; meanwhile open, create and delete fewer files'
            WHEN flagged
            THEN 'open, create and delete fewer files: one shared file instead of a file per process, open '
                 || 'once and keep it open, fewer shared file pointer calls and views' END AS recommendation,
       {'requests': requests, 'meta_requests': meta_requests, 'lookup': lookup, 'getattr': getattr,
        'create': "create", 'remove': remove, 'shared_fp': shared_fp, 'meta_busy_ns': meta_busy,
        'busy_ns': busy,
        'mean_meta_request_ns': round(meta_mean)::BIGINT, 'request_share': round(meta_requests / requests, 4),
        'busy_share': round(coalesce(meta_busy / nullif(busy, 0), 0), 4)} AS numbers,
       coalesce(r.ranks, []) AS ranks, []::UBIGINT[] AS callids, coalesce(f.files, []) AS files,
       coalesce(s.servers, []) AS servers
FROM (SELECT *, meta_requests > getvariable('meta_share') * requests
                AND meta_busy > getvariable('meta_share') * busy AS flagged,
             meta_mean >= getvariable('slow_meta_ns') AND meta_busy > getvariable('meta_share') * busy
                AND meta_busy >= getvariable('noise_ns') AS slow
      FROM t, busy), top_ranks r, top_files f, top_servers s
WHERE meta_requests > 0
