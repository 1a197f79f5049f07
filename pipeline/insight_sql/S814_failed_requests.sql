-- family: faults
-- title: requests a server failed: a full, failing or overloaded server
-- thresholds: -
-- columns: rpcs.server, rpcs.op, rpcs.error, rpcs.callids, calls.callid, calls.error, calls.file
-- The requests whose reply was an error, per server and error, and the calls they failed.  High when the
-- server could not do what was asked (ENOSPC, EDQUOT: full; EIO: failing; ENOMEM, EAGAIN, EBUSY,
-- ETIMEDOUT, ECONNRESET: overloaded or gone): the calls failed for the server's sake; info for the other
-- errors (a file that does not exist, a permission: the program's requests, which callid check sees).
WITH failed AS (
    SELECT server, op, error, t_start, unnest(CASE WHEN len(callids) > 0 THEN callids ELSE [callid] END) AS id
    FROM rpcs WHERE error IS NOT NULL
), per AS (
    SELECT f.server, f.error, count(DISTINCT (f.t_start, f.op)) AS requests, list(DISTINCT f.op ORDER BY f.op) AS ops,
           count(DISTINCT c.callid) FILTER (WHERE c.error IS NOT NULL) AS calls,
           list(DISTINCT c.callid ORDER BY c.callid) FILTER (WHERE c.error IS NOT NULL) AS callids,
           list(DISTINCT c.rank ORDER BY c.rank) FILTER (WHERE c.rank IS NOT NULL) AS ranks,
           list(DISTINCT c.file ORDER BY c.file) FILTER (WHERE c.file IS NOT NULL) AS files,
           f.error IN ('ENOSPC', 'EDQUOT', 'EIO', 'ENOMEM', 'EAGAIN', 'EBUSY', 'ETIMEDOUT', 'ECONNRESET')
               AS servers_fault
    FROM failed f LEFT JOIN calls c ON c.callid = f.id
    GROUP BY f.server, f.error
)
SELECT CASE WHEN servers_fault THEN 'high' ELSE 'info' END AS severity,
       printf('%s failed %d %s request%s with %s%s', server, requests, array_to_string(ops, ', '),
              CASE WHEN requests = 1 THEN '' ELSE 's' END, error,
              CASE WHEN calls > 0 THEN printf(': %d call%s failed with it', calls, CASE WHEN calls = 1 THEN '' ELSE 's' END)
                   ELSE '' END) AS detail,
       CASE error WHEN 'ENOSPC' THEN printf('%s is full: free space on it, or keep new files off it (a '
                                            || 'striping_factor hint below the server count)', server)
                  WHEN 'EDQUOT' THEN 'the quota is exhausted: raise it or remove files'
                  WHEN 'EIO' THEN printf('%s''s storage fails: check its device and logs', server)
                  ELSE CASE WHEN servers_fault THEN printf('%s is overloaded or went away: look at its load and '
                                                           || 'logs at those times', server) END END
           AS recommendation,
       {'server': server, 'error': error, 'requests': requests, 'calls': calls} AS numbers,
       coalesce(ranks, []) AS ranks, coalesce(callids, []) AS callids, coalesce(files, []) AS files,
       [server] AS servers
FROM per
ORDER BY servers_fault DESC, requests DESC, server, error
