-- Where did each call spend its time? Client time outside the servers, server queueing
-- (request arrival to first disk operation), and disk time (disk operations, capped at the server span).
WITH server_side AS (
    SELECT callid,
           min(t_start) AS first_arrival,
           max(t_end) AS last_done,
           min(t_start) FILTER (WHERE layer IN ('trove', 'meta')) AS first_disk,
           sum(t_end - t_start) FILTER (WHERE layer IN ('trove', 'meta')) AS disk_ns
    FROM (SELECT unnest(callids) AS callid, layer, t_start, t_end FROM server_ops)
    GROUP BY callid
)
SELECT c.callid_hex, c.rank, c.func, c.t_end - c.t_start AS call_ns,
       greatest(c.t_end - c.t_start - (s.last_done - s.first_arrival), 0) AS outside_servers_ns,
       coalesce(s.first_disk - s.first_arrival, 0) AS queue_ns,
       least(coalesce(s.disk_ns, 0), s.last_done - s.first_arrival) AS disk_ns
FROM calls c JOIN server_side s USING (callid)
ORDER BY call_ns DESC;
