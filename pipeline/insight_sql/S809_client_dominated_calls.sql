-- family: server
-- title: calls whose time is mostly outside the servers (exchange, waiting, the client)
-- thresholds: client_share
-- columns: calls.t_start, calls.t_end, calls.coll_seq, rpcs.callids, rpcs.t_start, rpcs.t_end, phases.phase
-- Per data call, the server part of the latency breakdown (queries/latency_breakdown.sql: its disk,
-- server queue and I/O parts, which are the union of the rank's requests for the call and its
-- aggregator I/O cycles, clipped to the call) and the client part, the rest (exchange, wait, other).
-- A call is client-dominated when its client part is more than client_share of its time.  Warning
-- when the client-dominated calls take more than client_share of the data calls' time; info when
-- there are some, but less.  Idle calls: client-dominated calls with no server part at all (a
-- collective's ranks that are not aggregators only exchange and wait).
WITH c AS (
    SELECT callid, rank, file, coll_seq, t_start, t_end, t_end - t_start AS call_ns
    FROM data_calls WHERE callid IS NOT NULL
), reqs AS (  -- each CallID a rank's request carries
    SELECT rank, t_start, t_end, unnest(callids) AS id FROM rpcs
), coll_reqs AS MATERIALIZED (  -- those of a collective's calls (joined first: not its calls with its calls)
    SELECT r.rank, r.t_start, r.t_end, k.coll_seq
    FROM reqs r JOIN (SELECT callid, coll_seq FROM calls WHERE coll_seq IS NOT NULL) k ON k.callid = r.id
), spans AS (  -- the server part: the rank's requests for the call (carrying its CallID or its
               -- collective's), its aggregator I/O cycles; each clipped to the call
    SELECT c.callid AS call, greatest(r.t_start, c.t_start) AS s, least(r.t_end, c.t_end) AS e
    FROM reqs r JOIN c ON c.callid = r.id AND c.rank = r.rank
    UNION ALL
    SELECT c.callid, greatest(r.t_start, c.t_start), least(r.t_end, c.t_end)
    FROM coll_reqs r JOIN c ON c.coll_seq = r.coll_seq AND c.rank = r.rank
    UNION ALL
    SELECT c.callid, greatest(p.t_start, c.t_start), least(p.t_end, c.t_end)
    FROM phases p JOIN c USING (callid) WHERE p.phase = 'io'
), clipped AS (
    SELECT * FROM spans WHERE s < e
), server_spans AS (SELECT call AS k, s AS lo, e AS hi FROM clipped
), server_part AS (
    SELECT k AS call, covered AS server_ns FROM covered('server_spans')
), split AS (
    SELECT c.*, coalesce(p.server_ns, 0) AS server_ns, c.call_ns - coalesce(p.server_ns, 0) AS client_ns
    FROM c LEFT JOIN server_part p ON p.call = c.callid
), flagged AS (
    SELECT * FROM split WHERE client_ns > getvariable('client_share') * call_ns
), t AS (
    SELECT (SELECT count(*) FROM split) AS calls, (SELECT sum(call_ns) FROM split)::BIGINT AS data_ns,
           count(*) AS client_calls, count(*) FILTER (WHERE server_ns = 0) AS idle_calls,
           sum(call_ns)::BIGINT AS client_calls_ns, sum(client_ns)::BIGINT AS client_ns,
           sum(server_ns)::BIGINT AS server_ns,
           list(callid ORDER BY call_ns DESC, callid) AS callids
    FROM flagged
), top_ranks AS (
    SELECT list(rank ORDER BY ns DESC, rank) AS ranks
    FROM (SELECT rank, sum(call_ns) AS ns FROM flagged GROUP BY rank)
), top_files AS (
    SELECT list(file ORDER BY ns DESC, file) AS files
    FROM (SELECT file, sum(call_ns) AS ns FROM flagged WHERE file IS NOT NULL GROUP BY file)
)
SELECT CASE WHEN client_calls_ns > getvariable('client_share') * data_ns THEN 'warning' ELSE 'info' END
           AS severity,
       printf('%d of %d data calls (%d with no time on the servers at all) spent more than %s of their time '
              || 'outside the servers: %s of the data calls'' %s (%s); of it %s outside the servers (exchange, '
              || 'waiting, client) and %s in them', client_calls, calls, idle_calls,
              fmt_pct(getvariable('client_share')), fmt_ns(client_calls_ns), fmt_ns(data_ns),
              fmt_pct(client_calls_ns / nullif(data_ns, 0)), fmt_ns(client_ns), fmt_ns(server_ns)) AS detail,
       CASE WHEN client_calls_ns > getvariable('client_share') * data_ns
            THEN 'collective calls: more aggregators (cb_nodes) so that fewer ranks wait for one, or '
                 || 'romio_cb_write / romio_cb_read = disable when each rank''s access is large and contiguous '
                 || '(no exchange); independent calls: fewer synchronisations between the ranks' END
           AS recommendation,
       {'calls': calls, 'client_calls': client_calls, 'idle_calls': idle_calls, 'data_ns': data_ns,
        'client_calls_ns': client_calls_ns, 'client_ns': client_ns, 'server_ns': server_ns,
        'client_calls_share': round(coalesce(client_calls_ns / nullif(data_ns, 0), 0), 4)} AS numbers,
       coalesce(r.ranks, []) AS ranks, t.callids, coalesce(f.files, []) AS files, []::VARCHAR[] AS servers
FROM t, top_ranks r, top_files f
WHERE client_calls > 0
