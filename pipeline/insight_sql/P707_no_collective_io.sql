-- family: client
-- title: independent calls where many ranks access one file (no collective I/O)
-- thresholds: independent_share, independent_count
-- columns: calls.collective, calls.file, calls.rank, calls.func
-- Drishti's M02/M03 (M04/M05 when collective calls are used), per direction on the shared files
-- (several ranks access them): high when independent calls are more than independent_share of the
-- data calls and more than independent_count; ok when collective calls are used.
WITH shared AS (
    SELECT file FROM data_calls GROUP BY file HAVING count(DISTINCT rank) > 1
), d AS (
    SELECT c.* FROM data_calls c SEMI JOIN shared USING (file)
), t AS (
    SELECT direction, count(*) AS requests, count(*) FILTER (WHERE NOT coalesce(collective, false)) AS independent,
           count(DISTINCT rank) AS ranks
    FROM d GROUP BY direction
), flagged AS (
    SELECT *, CASE WHEN independent > getvariable('independent_share') * requests
                        AND independent > getvariable('independent_count') THEN 'high'
                   WHEN independent < requests THEN 'ok' END AS severity
    FROM t
)
SELECT severity,
       CASE severity WHEN 'high' THEN CASE direction WHEN 'read' THEN 'M02' ELSE 'M03' END
                     WHEN 'ok' THEN CASE direction WHEN 'read' THEN 'M04' ELSE 'M05' END END AS drishti,
       printf('%s: %d of %d calls on shared files are independent (%s), %d collective, from %d ranks', direction,
              independent, requests, fmt_pct(independent / requests), requests - independent, ranks) AS detail,
       CASE WHEN severity = 'high' THEN 'use collective calls (MPI_File_' || direction || '_all with a file view) so '
            || 'that aggregators combine the ranks'' requests (cb_nodes, cb_buffer_size)' END AS recommendation,
       {'direction': direction, 'requests': requests, 'independent': independent,
        'independent_share': round(independent / requests, 4), 'ranks': ranks} AS numbers,
       []::INTEGER[] AS ranks, []::UBIGINT[] AS callids,
       CASE WHEN severity = 'high' THEN (SELECT list(file ORDER BY n DESC, file) FROM (
            SELECT file, count(*) AS n FROM d WHERE d.direction = flagged.direction
                                                AND NOT coalesce(collective, false) GROUP BY file))
            ELSE [] END AS files,
       []::VARCHAR[] AS servers
FROM flagged WHERE severity IS NOT NULL
ORDER BY direction
