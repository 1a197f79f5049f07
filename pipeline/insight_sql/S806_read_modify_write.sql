-- family: server
-- title: read-modify-write: collective writes with holes read their extent back before writing it
-- thresholds: rmw_share
-- columns: arrows.op, arrows.func, arrows.share_bytes, arrows.file, server_ops.rank, server_ops.size, calls.bytes
-- The disk reads done for write calls: an aggregator of a collective write reads a cycle's extent
-- back when the calls' data leave holes in it, then writes it whole (its trove_read operations carry
-- the write calls' CallIDs).  Warning when the bytes read back are more than rmw_share of the bytes
-- written to disk for write calls; info below.  Ranks: the aggregators that read back.
WITH rmw AS (  -- arrows from write calls to disk reads
    SELECT callid, file, server, event_id, size, share_bytes
    FROM arrows WHERE op = 'trove_read' AND func LIKE 'MPI_File_%write%'
), ops AS (  -- each read-back operation once, with the rank that sent its request (the aggregator)
    SELECT r.server, r.event_id, any_value(r.size) AS size, any_value(r.file) AS file,
           any_value(s.rank) AS aggregator
    FROM rmw r JOIN server_ops s USING (server, event_id) GROUP BY r.server, r.event_id
), written AS (  -- disk writes for write calls, each once (an operation of one CallID has one arrow);
                 -- rmw_call: it serves a call that read back
    SELECT size, callid IN (SELECT callid FROM rmw) AS rmw_call
    FROM arrows WHERE op = 'trove_write' AND func LIKE 'MPI_File_%write%' AND n_callids = 1
    UNION ALL
    SELECT any_value(size), bool_or(callid IN (SELECT callid FROM rmw))
    FROM arrows WHERE op = 'trove_write' AND func LIKE 'MPI_File_%write%' AND n_callids > 1
    GROUP BY server, event_id
), t AS (
    SELECT count(*) AS rmw_ops, sum(size)::BIGINT AS read_back,
           (SELECT count(DISTINCT callid) FROM rmw) AS calls,
           (SELECT coalesce(sum(bytes), 0) FROM calls
            WHERE callid IN (SELECT callid FROM rmw))::BIGINT AS data,
           (SELECT coalesce(sum(size) FILTER (WHERE rmw_call), 0) FROM written)::BIGINT AS rmw_written,
           (SELECT coalesce(sum(size), 0) FROM written)::BIGINT AS written,
           (SELECT string_agg(DISTINCT func, ', ' ORDER BY func) FROM calls
            WHERE callid IN (SELECT callid FROM rmw)) AS funcs
    FROM ops
), top_calls AS (
    SELECT list(callid ORDER BY b DESC, callid) AS callids
    FROM (SELECT callid, sum(coalesce(share_bytes, size)) AS b FROM rmw GROUP BY callid)
), top_ranks AS (
    SELECT list(aggregator ORDER BY b DESC, aggregator) AS ranks
    FROM (SELECT aggregator, sum(size) AS b FROM ops GROUP BY aggregator)
), top_files AS (
    SELECT list(file ORDER BY b DESC, file) AS files
    FROM (SELECT file, sum(size) AS b FROM ops GROUP BY file)
), top_servers AS (
    SELECT list(server ORDER BY b DESC, server) AS servers
    FROM (SELECT server, sum(size) AS b FROM ops GROUP BY server)
)
SELECT CASE WHEN read_back > getvariable('rmw_share') * written THEN 'warning' ELSE 'info' END AS severity,
       printf('%s: %d calls read %s back from disk (%d reads) to write %s of data (%s with the holes); '
              || 'read back: %s of the %s written to disk for write calls', funcs, calls,
              format_bytes(read_back), rmw_ops, format_bytes(data), format_bytes(rmw_written),
              fmt_pct(read_back / nullif(written, 0)), format_bytes(written)) AS detail,
       CASE WHEN read_back > getvariable('rmw_share') * written
            THEN 'write contiguous data without holes (fill the gaps, or pack each rank''s blocks), or set '
                 || 'romio_cb_write=disable for sparse writes: independent list I/O writes only the data and '
                 || 'reads nothing back' END AS recommendation,
       {'rmw_ops': rmw_ops, 'read_back_bytes': read_back, 'calls': calls, 'data_bytes': data,
        'rmw_written_bytes': rmw_written, 'written_bytes': written,
        'rmw_share': round(read_back / nullif(written, 0), 4)} AS numbers,
       coalesce(r.ranks, []) AS ranks, coalesce(c.callids, []) AS callids, coalesce(f.files, []) AS files,
       coalesce(s.servers, []) AS servers
FROM t, top_calls c, top_ranks r, top_files f, top_servers s
WHERE rmw_ops > 0
