-- Which calls waited for one slow server? For each call touching several servers, the server whose
-- last disk operation finished last, and how much later than the call's other servers did.
WITH per_server AS (
    SELECT callid_hex, func, rank, server, max(t_end) AS done
    FROM arrows
    GROUP BY ALL
), spread AS (
    SELECT callid_hex, func, rank,
           arg_max(server, done) AS slowest_server,
           max(done) - min(done) AS straggle_ns,
           count(*) AS servers
    FROM per_server
    GROUP BY ALL
    HAVING count(*) > 1
)
SELECT callid_hex, func, rank, slowest_server, servers, straggle_ns
FROM spread
ORDER BY straggle_ns DESC
LIMIT 20;
