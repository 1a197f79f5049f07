-- How much of the data traffic travelled as small I/O (data inside the request, no flow)?
SELECT count(*) FILTER (WHERE op LIKE 'small_io%') AS small_io_requests,
       count(*) FILTER (WHERE op LIKE 'io_%') AS flow_requests,
       round(count(*) FILTER (WHERE op LIKE 'small_io%') / greatest(count(*), 1), 3) AS small_io_share,
       coalesce(sum(size) FILTER (WHERE op LIKE 'small_io%'), 0) AS small_io_bytes,
       coalesce(sum(size) FILTER (WHERE op LIKE 'io_%'), 0) AS flow_bytes
FROM server_ops
WHERE layer = 'req' AND (op LIKE 'small_io%' OR op LIKE 'io_%');
