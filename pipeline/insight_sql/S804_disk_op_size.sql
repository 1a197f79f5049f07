-- family: server
-- title: disk operations much smaller (or larger) than the requests after aggregation
-- thresholds: disk_size_ratio, small_disk_op
-- columns: calls.size, calls.file_offset, calls.func, server_ops.op, server_ops.size
-- Per direction: the mean (and median) size the data calls request against the mean size of the
-- servers' disk data operations (trove_read, trove_write); ratio = disk / requested.  Warning when the
-- ratio is disk_size_ratio or less, high when moreover the disk operations are smaller than small_disk_op
-- on average (small flow buffers or strips: every byte costs more disk operations than the default's) (each request costs that many disk operations or more: flow buffers
-- or strips smaller than the accesses); ok when it is 1 or more (aggregation, e.g. collective
-- buffering, made the disk operations at least as large as the requests); info in between.  The advice
-- (a warning's): a strip and a flow buffer as large as the mean access, at most the largest file's size
-- over the I/O servers (so that files still spread over all of them: S801), within callid run's bounds;
-- when every access starts on a multiple of the most common access size (a record), that size, as
-- P702 advises (so that the strips stay aligned with the records), with a flow buffer as large
-- (within the flow buffer's bounds).
WITH req AS (
    SELECT direction, count(*) AS calls, avg(size) AS mean, median(size) AS med, sum(size)::BIGINT AS bytes,
           mode(size) AS rec
    FROM data_calls GROUP BY direction
), on_record AS (  -- every access of the direction starts on a multiple of its record size
    SELECT r.direction, bool_and(c.file_offset % r.rec = 0) AS aligned
    FROM data_calls c JOIN req r USING (direction) WHERE c.file_offset IS NOT NULL AND r.rec > 0
    GROUP BY r.direction
), disk AS (
    SELECT direction, count(*) AS ops, avg(size) AS mean, median(size) AS med, sum(size)::BIGINT AS bytes
    FROM disk_data GROUP BY direction
), extent AS (  -- the largest file's size, over the I/O servers: a strip at most that spreads it over all
    SELECT direction, max(size) // greatest(1, (SELECT count(*) FROM io_servers)) AS per_server
    FROM (SELECT direction, file, max(file_offset + size) AS size FROM data_calls GROUP BY ALL) GROUP BY direction
), top_files AS (
    SELECT direction, list(file ORDER BY n DESC, file) AS files
    FROM (SELECT direction, file, sum(size) AS n FROM data_calls GROUP BY ALL) GROUP BY direction
), top_servers AS (
    SELECT direction, list(server ORDER BY n DESC, server) AS servers
    FROM (SELECT direction, server, count(*) AS n FROM disk_data GROUP BY ALL) GROUP BY direction
), g AS (
    SELECT r.direction, r.calls, r.mean AS r_mean, r.med AS r_med, d.ops, d.mean AS d_mean, d.med AS d_med,
           d.mean / r.mean AS ratio,
           a.aligned AND r.rec BETWEEN getvariable('min_strip_size') AND least(getvariable('max_strip_size'),
                                                                                e.per_server) AS by_record,
           CASE WHEN by_record THEN r.rec ELSE strip_advice(least(r.mean, e.per_server)) END AS strip,
           CASE WHEN d.mean / r.mean <= getvariable('disk_size_ratio') AND d.mean < getvariable('small_disk_op')
                THEN 'high'
                WHEN d.mean / r.mean <= getvariable('disk_size_ratio') THEN 'warning'
                WHEN d.mean / r.mean >= 1 THEN 'ok' ELSE 'info' END AS severity
    FROM req r JOIN disk d USING (direction) LEFT JOIN extent e USING (direction)
    LEFT JOIN on_record a USING (direction)
), advised AS (
    SELECT *, CASE WHEN by_record THEN least(greatest(strip, getvariable('min_flow_buffer')),
                                             getvariable('max_flow_buffer'))::BIGINT
                   ELSE flow_advice(least(r_mean, strip), strip) END AS flow
    FROM g
)
SELECT g.severity,
       printf('%s: %d calls request %s on average (median %s); the servers'' %d disk ops move %s on average '
              || '(median %s): %s of the request', g.direction, g.calls, format_bytes(round(g.r_mean)::BIGINT),
              format_bytes(round(g.r_med)::BIGINT), g.ops, format_bytes(round(g.d_mean)::BIGINT),
              format_bytes(round(g.d_med)::BIGINT), fmt_pct(g.ratio))
       || CASE WHEN g.severity IN ('high', 'warning') THEN printf(', %.1f disk ops per request', 1 / g.ratio)
              WHEN g.severity = 'ok' THEN ' (the disk operations are as large as the requests or larger)'
              ELSE '' END AS detail,
       CASE WHEN g.severity IN ('high', 'warning')
            THEN printf('a flow buffer and a striping_unit as large as the accesses (%s) allow while a file still '
                        || 'spreads over every I/O server (now %s and %s): callid run --flow-buffer %s '
                        || '--strip-size %s (or the striping_unit hint); or collective buffering '
                        || '(cb_buffer_size) to combine requests', format_bytes(round(g.r_mean)::BIGINT),
                        format_bytes(getvariable('flow_buffer')::BIGINT),
                        format_bytes(getvariable('strip_size')::BIGINT), size_arg(g.flow), size_arg(g.strip))
            END AS recommendation,
       {'direction': g.direction, 'calls': g.calls, 'mean_request_bytes': round(g.r_mean)::BIGINT,
        'median_request_bytes': round(g.r_med)::BIGINT, 'disk_ops': g.ops,
        'mean_disk_op_bytes': round(g.d_mean)::BIGINT, 'median_disk_op_bytes': round(g.d_med)::BIGINT,
        'size_ratio': round(g.ratio, 4),
        'advised_strip_bytes': CASE WHEN g.severity IN ('high', 'warning') THEN g.strip END,
        'advised_flow_buffer_bytes': CASE WHEN g.severity IN ('high', 'warning') THEN g.flow END} AS numbers,
       []::INTEGER[] AS ranks, []::UBIGINT[] AS callids, coalesce(f.files, []) AS files,
       coalesce(s.servers, []) AS servers
FROM advised g LEFT JOIN top_files f USING (direction) LEFT JOIN top_servers s USING (direction)
ORDER BY g.direction
