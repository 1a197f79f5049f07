-- Where did each call spend its time? Per call on its rank, in parts that never overlap (a stretch
-- of the call counts in the first part that explains it): disk (the disk operations of the rank's
-- requests for the call), server queue (a request's arrival to its first disk operation), I/O (the
-- rank's requests outstanding and an aggregator's I/O cycles), exchange (a collective's plan and data
-- exchange between ranks), wait (a collective call waiting for the other ranks of its collective: until
-- the last of them arrives, and while their requests, I/O cycles or exchanges for it go on), other
-- (the rest).
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
), coll_work AS (  -- the work of each collective's ranks: their requests, I/O cycles and exchanges
    SELECT o.coll_seq AS k, r.t_start AS lo, r.t_end AS hi
    FROM calls o JOIN (SELECT rank, t_start, t_end, unnest(callids) AS id FROM rpcs) r
         ON r.id = o.callid AND r.rank = o.rank
    WHERE o.coll_seq IS NOT NULL
    UNION ALL
    SELECT o.coll_seq, p.t_start, p.t_end FROM calls o JOIN phases p ON p.callid = o.callid
    WHERE o.coll_seq IS NOT NULL AND p.phase <> 'wait'
), coll_busy AS (  -- ... merged into islands: few per collective, whatever its ranks
    SELECT k AS coll_seq, min(lo) AS t_start, max(hi) AS t_end FROM islands('coll_work') GROUP BY k, island
), arrived AS (SELECT coll_seq, max(t_start) AS last FROM calls WHERE coll_seq IS NOT NULL GROUP BY coll_seq
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
)
SELECT callid_hex, rank, func, call_ns, exchange_ns, wait_ns, io_ns, server_queue_ns, disk_ns,
       call_ns - (exchange_ns + wait_ns + io_ns + server_queue_ns + disk_ns) AS other_ns,
       round(100 * (exchange_ns + wait_ns + io_ns + server_queue_ns + disk_ns) / nullif(call_ns, 0), 1)
           AS accounted_pct
FROM named ORDER BY call_ns DESC, t_start;
