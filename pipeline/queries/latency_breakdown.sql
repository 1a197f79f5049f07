-- Where did each call spend its time? Per call on its rank, in parts that never overlap (a stretch
-- of the call counts in the first part that explains it): disk (the disk operations of the rank's
-- requests for the call), server queue (a request's arrival to its first disk operation), I/O (the
-- rank's requests outstanding and an aggregator's I/O cycles), exchange (a collective's plan and data
-- exchange between ranks), wait (a collective call waiting for the other ranks of its collective: until
-- the last of them arrives, and while their requests, I/O cycles or exchanges for it go on), other
-- (the rest).  A call that waited names the rank it waited for (waited_for_rank: the last rank of its
-- collective to arrive, if after the call started, else the other rank that worked longest on the
-- collective) and that rank's disk operations for it (waited_for_disk_ops).
-- A call's requests are its rank's rpcs carrying its CallID, or for a collective any CallID of the
-- same collective (an aggregator's); their server events are those of the same (rank, req_id),
-- clipped to the request. `callid stats` lists the slowest calls with this query (its first CTE
-- picks the calls).
WITH c AS (
    SELECT callid, callid_hex, rank, func, coll_seq, t_start, t_end, t_end - t_start AS call_ns
    FROM calls
), ids AS (  -- the CallIDs the rank's requests for a call may carry: its own, its collective's
    SELECT callid AS call, rank, callid AS id FROM c WHERE callid IS NOT NULL
    UNION
    SELECT c.callid, c.rank, o.callid FROM c JOIN calls o ON o.coll_seq = c.coll_seq
    WHERE c.callid IS NOT NULL AND o.callid IS NOT NULL
), reqs AS (
    SELECT DISTINCT i.call, r.rank, r.req_seq, r.t_start, r.t_end
    FROM (SELECT rank, req_seq, t_start, t_end, unnest(callids) AS id FROM rpcs) r
    JOIN ids i ON i.id = r.id AND i.rank = r.rank
), ops AS (
    SELECT * FROM (
        SELECT q.call, q.req_seq, s.layer IN ('trove', 'meta') AS disk,
               greatest(s.t_start, q.t_start) AS t_start, least(s.t_end, q.t_end) AS t_end
        FROM reqs q JOIN server_ops s ON s.rank = q.rank AND s.req_id = q.req_seq)
    WHERE t_start < t_end
), coll_reqs AS (  -- each collective's ranks' requests for it
    SELECT o.coll_seq AS k, r.rank, r.req_seq, r.t_start, r.t_end
    FROM calls o JOIN (SELECT rank, req_seq, t_start, t_end, unnest(callids) AS id FROM rpcs) r
         ON r.id = o.callid AND r.rank = o.rank
    WHERE o.coll_seq IS NOT NULL
), coll_work AS (  -- the work of each collective's ranks: their requests, I/O cycles and exchanges
    SELECT k, rank, t_start AS lo, t_end AS hi FROM coll_reqs
    UNION ALL
    SELECT o.coll_seq, o.rank, p.t_start, p.t_end FROM calls o JOIN phases p ON p.callid = o.callid
    WHERE o.coll_seq IS NOT NULL AND p.phase <> 'wait'
), coll_busy AS (  -- ... merged into islands: few per collective, whatever its ranks
    SELECT k AS coll_seq, min(lo) AS t_start, max(hi) AS t_end FROM islands('coll_work') GROUP BY k, island
), arrived AS (
    SELECT coll_seq, max(t_start) AS last, arg_max(rank, t_start) AS last_rank
    FROM calls WHERE coll_seq IS NOT NULL GROUP BY coll_seq
), worked AS (  -- per collective and rank: its work on it, and its requests' disk operations
    SELECT w.k AS coll_seq, w.rank, w.work_ns, coalesce(d.disk_ops, 0) AS disk_ops
    FROM (SELECT k, rank, sum(hi - lo) AS work_ns FROM coll_work WHERE k IN (SELECT coll_seq FROM c)
          GROUP BY ALL) w
    LEFT JOIN (SELECT q.k, q.rank, count(*) AS disk_ops
               FROM (SELECT DISTINCT k, rank, req_seq FROM coll_reqs WHERE k IN (SELECT coll_seq FROM c)) q
               JOIN server_ops s ON s.rank = q.rank AND s.req_id = q.req_seq
               WHERE s.layer IN ('trove', 'meta') GROUP BY ALL) d ON d.k = w.k AND d.rank = w.rank
), spans AS (  -- part: 1 disk, 2 server queue, 3 I/O, 4 exchange, 5 wait
    SELECT call, 1 AS part, t_start, t_end FROM ops WHERE disk
    UNION ALL
    SELECT call, 2, min(t_start), coalesce(min(t_start) FILTER (WHERE disk), max(t_end))
    FROM ops GROUP BY call, req_seq
    UNION ALL
    SELECT call, 3, t_start, t_end FROM reqs
    UNION ALL
    SELECT p.callid, CASE p.phase WHEN 'io' THEN 3 WHEN 'wait' THEN 5 ELSE 4 END, p.t_start, p.t_end
    FROM phases p SEMI JOIN c ON c.callid = p.callid
    UNION ALL  -- the other ranks of its collective: until the last arrives, and while they work on it
    SELECT c.callid, 5, c.t_start, a.last FROM c JOIN arrived a USING (coll_seq) WHERE c.callid IS NOT NULL
    UNION ALL
    SELECT c.callid, 5, b.t_start, b.t_end FROM c JOIN coll_busy b USING (coll_seq) WHERE c.callid IS NOT NULL
), clipped AS (
    SELECT x.call, x.part, greatest(x.t_start, c.t_start) AS s, least(x.t_end, c.t_end) AS e
    FROM spans x JOIN c ON c.callid = x.call
), edges AS (  -- per call and instant: how many spans of each part begin (+1) or end (-1) there
    SELECT call, t, sum(d) FILTER (WHERE part = 1) AS d1, sum(d) FILTER (WHERE part = 2) AS d2,
           sum(d) FILTER (WHERE part = 3) AS d3, sum(d) FILTER (WHERE part = 4) AS d4,
           sum(d) FILTER (WHERE part = 5) AS d5
    FROM (SELECT call, part, s AS t, 1 AS d FROM clipped WHERE s < e
          UNION ALL SELECT call, part, e, -1 FROM clipped WHERE s < e
          UNION ALL SELECT callid, 0, t_start, 0 FROM c WHERE callid IS NOT NULL
          UNION ALL SELECT callid, 0, t_end, 0 FROM c WHERE callid IS NOT NULL)
    GROUP BY call, t
), stretches AS (  -- from each instant to the next: the first part with a span open over it (0: none)
    SELECT call, lead(t) OVER (PARTITION BY call ORDER BY t) - t AS len,
           CASE WHEN sum(d1) OVER w > 0 THEN 1 WHEN sum(d2) OVER w > 0 THEN 2
                WHEN sum(d3) OVER w > 0 THEN 3 WHEN sum(d4) OVER w > 0 THEN 4
                WHEN sum(d5) OVER w > 0 THEN 5 ELSE 0 END AS part
    FROM edges WINDOW w AS (PARTITION BY call ORDER BY t ROWS UNBOUNDED PRECEDING)
), parts AS (
    SELECT call, sum(len) FILTER (WHERE part = 1) AS disk_ns,
           sum(len) FILTER (WHERE part = 2) AS queue_ns, sum(len) FILTER (WHERE part = 3) AS io_ns,
           sum(len) FILTER (WHERE part = 4) AS exchange_ns, sum(len) FILTER (WHERE part = 5) AS wait_ns
    FROM stretches GROUP BY call
), named AS (
    SELECT c.*, coalesce(p.exchange_ns, 0)::BIGINT AS exchange_ns,
           coalesce(p.wait_ns, 0)::BIGINT AS wait_ns, coalesce(p.io_ns, 0)::BIGINT AS io_ns,
           coalesce(p.queue_ns, 0)::BIGINT AS server_queue_ns, coalesce(p.disk_ns, 0)::BIGINT AS disk_ns
    FROM c LEFT JOIN parts p ON p.call = c.callid
), waited AS (  -- the rank each call that waited waited for
    SELECT n.callid, CASE WHEN a.last > n.t_start AND a.last_rank <> n.rank THEN a.last_rank
                          ELSE (SELECT arg_max(w.rank, w.work_ns) FROM worked w
                                WHERE w.coll_seq = n.coll_seq AND w.rank <> n.rank) END AS rank
    FROM named n JOIN arrived a USING (coll_seq) WHERE n.wait_ns > 0
)
SELECT n.callid_hex, n.rank, n.func, n.call_ns, n.exchange_ns, n.wait_ns, n.io_ns, n.server_queue_ns, n.disk_ns,
       n.call_ns - (n.exchange_ns + n.wait_ns + n.io_ns + n.server_queue_ns + n.disk_ns) AS other_ns,
       round(100 * (n.exchange_ns + n.wait_ns + n.io_ns + n.server_queue_ns + n.disk_ns) / nullif(n.call_ns, 0), 1)
           AS accounted_pct,
       x.rank AS waited_for_rank, CASE WHEN x.rank IS NOT NULL THEN coalesce(w.disk_ops, 0) END AS waited_for_disk_ops
FROM named n LEFT JOIN waited x USING (callid) LEFT JOIN worked w ON w.coll_seq = n.coll_seq AND w.rank = x.rank
ORDER BY n.call_ns DESC, n.t_start;
