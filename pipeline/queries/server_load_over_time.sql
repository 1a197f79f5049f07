-- How busy was each server over time? Disk operations and bytes per server in 10 ms buckets.
SELECT server,
       (t_start - (SELECT min(t_start) FROM server_ops)) // 10000000 * 10 AS ms,
       count(*) AS disk_ops,
       sum(size) AS bytes,
       count(*) FILTER (WHERE op LIKE '%read%') AS reads,
       count(*) FILTER (WHERE op LIKE '%write%') AS writes
FROM server_ops
WHERE layer IN ('trove', 'meta')
GROUP BY ALL
ORDER BY ms, server;
