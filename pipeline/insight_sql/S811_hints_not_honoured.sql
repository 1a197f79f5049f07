-- family: server
-- title: hints declared against what happened: aggregators (cb_nodes), their buffers (cb_buffer_size), collective buffering (romio_cb_write, romio_cb_read) and striping (striping_factor, striping_unit)
-- thresholds: -
-- columns: calls.hints, calls.file, calls.func, calls.collective, calls.coll_seq, phases.size, server_ops.rank, server_ops.callids, server_ops.server, run.layout, run.client.config (strip_size, mpi_io)
-- Each file's hints as its calls declared them (open, set_view, set_info: the last value of each key) against
-- what the disk operations show.  A collective call is aggregated when a disk operation of it, sent by one
-- rank (server_ops.rank), carries another rank's CallID; its aggregators are the ranks that sent its disk
-- operations.  cb_nodes: the most aggregators of one aggregated collective call on the file; cb_buffer_size:
-- the largest I/O of one cycle of an aggregator (its 'io' phases; at most the buffer); romio_cb_write
-- and romio_cb_read: 'enable' with no aggregated call, 'disable' with one; striping_factor: the servers
-- holding the file's data; striping_unit: the file's strip size (the run's --strip-size when the MPI-IO
-- did not pass the hints on, striping_hints 0).  Warning: a hint not honoured (ignored or overridden); ok:
-- honoured; info: nothing to compare with (no aggregated call, no data).  One row per file and hint.
WITH bits AS (
    SELECT (split_part(value, '/', 1)::INTEGER - split_part(value, '/', 2)::INTEGER) AS cb
    FROM run WHERE key = 'layout'
), given AS (
    SELECT c.file, c.t_start, c.callid, trim(split_part(kv, '=', 1)) AS key, trim(split_part(kv, '=', 2)) AS value
    FROM calls c, unnest(string_split(c.hints, ';')) AS t(kv)
    WHERE c.hints IS NOT NULL AND c.file IS NOT NULL
), declared AS (
    SELECT file, key, arg_max(value, t_start) AS value, list(DISTINCT callid) AS callids
    FROM given
    WHERE key IN ('cb_nodes', 'cb_buffer_size', 'romio_cb_write', 'romio_cb_read', 'striping_factor',
                  'striping_unit')
    GROUP BY file, key
), ops AS (  -- the data disk operations of each file's calls, with the rank that sent each
    SELECT d.rank AS sender, d.server, d.callids, c.file, c.coll_seq, c.collective,
           CASE WHEN c.func LIKE '%write%' THEN 'write' ELSE 'read' END AS dir
    FROM disk_data d JOIN calls c ON c.callid = d.callids[1]
    WHERE d.rank >= 0 AND c.file IN (SELECT file FROM declared)
), colls AS (  -- per collective call: its aggregators, and whether another rank's data went through one
    SELECT o.file, o.coll_seq, o.dir, count(DISTINCT o.sender) AS senders,
           bool_or(list_bool_or(list_transform(o.callids, lambda id: (id >> b.cb) <> o.sender))) AS aggregated,
           list(DISTINCT o.sender) AS ranks
    FROM ops o, bits b WHERE o.collective GROUP BY ALL
), cycles AS (  -- the largest I/O of one cycle of an aggregator, per aggregated collective call
    SELECT c.file, c.coll_seq, max(p.size) AS largest
    FROM phases p JOIN calls c USING (callid)
    WHERE p.phase = 'io' AND (c.file, c.coll_seq) IN (SELECT (file, coll_seq) FROM colls WHERE aggregated)
    GROUP BY ALL
), observed AS (
    SELECT f.file,
           (SELECT max(senders) FROM colls c WHERE c.file = f.file AND c.aggregated) AS aggregators,
           (SELECT arg_max(ranks, senders) FROM colls c WHERE c.file = f.file AND c.aggregated) AS agg_ranks,
           (SELECT max(largest) FROM cycles c WHERE c.file = f.file) AS cycle,
           (SELECT count(*) FROM colls c WHERE c.file = f.file AND c.dir = 'write') AS coll_w,
           (SELECT count(*) FROM colls c WHERE c.file = f.file AND c.dir = 'write' AND c.aggregated) AS agg_w,
           (SELECT count(*) FROM colls c WHERE c.file = f.file AND c.dir = 'read') AS coll_r,
           (SELECT count(*) FROM colls c WHERE c.file = f.file AND c.dir = 'read' AND c.aggregated) AS agg_r,
           (SELECT count(DISTINCT server) FROM ops o WHERE o.file = f.file) AS servers,
           (SELECT list(DISTINCT server) FROM ops o WHERE o.file = f.file) AS server_names
    FROM (SELECT DISTINCT file FROM declared) f
), judged AS (
    SELECT d.file, d.key, d.value, d.callids, o.*,
           CASE d.key
               WHEN 'cb_nodes' THEN CASE WHEN o.aggregators IS NULL THEN NULL
                                         ELSE o.aggregators = try_cast(d.value AS BIGINT) END
               WHEN 'cb_buffer_size' THEN CASE WHEN o.cycle IS NULL THEN NULL
                                               ELSE o.cycle <= try_cast(d.value AS BIGINT) END
               WHEN 'romio_cb_write' THEN CASE WHEN o.coll_w = 0 OR lower(d.value) = 'automatic' THEN NULL
                                               WHEN lower(d.value) = 'enable' THEN o.agg_w = o.coll_w
                                               WHEN lower(d.value) = 'disable' THEN o.agg_w = 0 END
               WHEN 'romio_cb_read' THEN CASE WHEN o.coll_r = 0 OR lower(d.value) = 'automatic' THEN NULL
                                              WHEN lower(d.value) = 'enable' THEN o.agg_r = o.coll_r
                                              WHEN lower(d.value) = 'disable' THEN o.agg_r = 0 END
               WHEN 'striping_factor' THEN CASE WHEN o.servers = 0 THEN NULL
                                                ELSE o.servers = try_cast(d.value AS BIGINT) END
               WHEN 'striping_unit' THEN CASE WHEN getvariable('striping_hints') = 1 THEN true
                                              ELSE try_cast(d.value AS BIGINT) = getvariable('strip_size')::BIGINT END
           END AS honoured,
           CASE d.key
               WHEN 'cb_nodes' THEN CASE WHEN coalesce(o.aggregators, 0) = 0
                                         THEN 'no aggregated collective call recorded'
                                         ELSE printf('%d aggregator(s) in its most aggregated collective call',
                                                     o.aggregators) END
               WHEN 'cb_buffer_size' THEN CASE WHEN o.cycle IS NULL THEN 'no aggregator''s I/O cycle recorded'
                                               ELSE printf('an aggregator''s largest I/O of one cycle %s',
                                                           format_bytes(o.cycle)) END
               WHEN 'romio_cb_write' THEN printf('%d of %d collective writes aggregated', o.agg_w, o.coll_w)
               WHEN 'romio_cb_read' THEN printf('%d of %d collective reads aggregated', o.agg_r, o.coll_r)
               WHEN 'striping_factor' THEN printf('data on %d server(s)', o.servers)
               WHEN 'striping_unit' THEN CASE WHEN getvariable('striping_hints') = 1 THEN 'passed on to the file system'
                                              ELSE printf('strips of %s', format_bytes(getvariable('strip_size')::BIGINT)) END
           END AS what
    FROM declared d JOIN observed o USING (file)
)
SELECT CASE WHEN honoured IS NULL THEN 'info' WHEN honoured THEN 'ok' ELSE 'warning' END AS severity,
       printf('%s=%s on %s: %s', key, value, file, what)
       || CASE WHEN honoured IS NULL THEN ' (nothing to compare with)'
               WHEN honoured THEN ': honoured' ELSE ': not honoured' END AS detail,
       CASE WHEN honoured IS NOT false THEN NULL
            WHEN key = 'cb_nodes'
            THEN printf('ROMIO takes at most cb_config_list''s aggregators per host (default *:1, one per host): '
                        || 'set cb_config_list=*:%s, or spread the ranks over %s hosts, for %s aggregators',
                        value, value, value)
            WHEN key LIKE 'romio_cb_%' OR key = 'cb_buffer_size'
            THEN printf('%s=%s was overridden: check the MPI library''s collective-buffering hints (MPI_File_get_info '
                        || 'after the open shows what it uses)', key, value)
            ELSE 'the MPI-IO driver did not pass the striping on to the file system (ROMIO''s UFS driver passes '
                 || 'none): set it on the file system itself (callid run --servers and --strip-size; lfs setstripe '
                 || 'on Lustre), or use a driver that passes it'
       END AS recommendation,
       {'hint': key, 'declared': try_cast(value AS BIGINT), 'aggregators': aggregators, 'collective_writes': coll_w,
        'aggregated_writes': agg_w, 'collective_reads': coll_r, 'aggregated_reads': agg_r,
        'servers': servers, 'strip_size_bytes': getvariable('strip_size')::BIGINT,
        'largest_cycle_bytes': cycle} AS numbers,
       CASE WHEN key = 'cb_nodes' THEN coalesce(list_sort(agg_ranks), []) ELSE [] END::INTEGER[] AS ranks,
       list_sort(callids) AS callids,
       [file] AS files,
       CASE WHEN key = 'striping_factor' THEN list_sort(server_names) ELSE [] END::VARCHAR[] AS servers
FROM judged
ORDER BY file, key
