-- family: client
-- title: collective buffering's aggregators against the nodes, and the ranks waiting for them
-- thresholds: aggregator_wait_share
-- columns: phases.rank, phases.phase, phases.callid, phases.t_start, phases.t_end, calls.coll_seq, calls.clock, calls.func, calls.t_start, calls.t_end
-- needs: collectives
-- Drishti's M08-M10 from the run itself, per direction: the aggregators are the ranks that did the I/O
-- cycles of the collective data calls (phase 'io'), the nodes the hosts of the ranks that took part
-- (their clocks).  Fewer aggregators than nodes (M08): the other nodes' links stay idle and their ranks
-- wait (phase 'wait') for the few aggregators: high when the ranks that did not aggregate spent at least
-- aggregator_wait_share of their collective data calls waiting, warning otherwise (Drishti: ok).  More
-- aggregators than nodes (M09): several on one node share its link and memory: high, as Drishti says.  As
-- many (M10): ok.
WITH colls AS (
    SELECT c.callid, c.rank, c.clock, c.t_end - c.t_start AS ns, c.direction
    FROM data_calls c WHERE c.collective AND c.coll_seq IS NOT NULL
), ph AS (
    SELECT c.direction, p.rank, p.phase, p.t_end - p.t_start AS ns FROM phases p JOIN colls c USING (callid)
), per AS (
    SELECT direction, count(DISTINCT clock) AS nodes,
           (SELECT count(DISTINCT rank) FROM ph WHERE ph.direction = c.direction AND phase = 'io') AS aggregators,
           (SELECT list(DISTINCT rank ORDER BY rank) FROM ph WHERE ph.direction = c.direction AND phase = 'io')
               AS agg_ranks,
           count(*) AS calls
    FROM colls c GROUP BY direction
), waits AS (  -- the ranks that did not aggregate: their time waiting for the aggregators, of their calls' time
    SELECT c.direction, coalesce(sum(w.ns), 0)::BIGINT AS wait_ns, sum(c.ns)::BIGINT AS call_ns, count(*) AS others
    FROM colls c JOIN per p USING (direction)
    LEFT JOIN (SELECT p.callid, sum(p.t_end - p.t_start) AS ns FROM phases p WHERE p.phase = 'wait' GROUP BY ALL) w
         USING (callid)
    WHERE NOT list_contains(p.agg_ranks, c.rank) GROUP BY c.direction
), g AS (
    SELECT p.*, coalesce(w.wait_ns, 0) AS wait_ns, coalesce(w.call_ns, 0) AS call_ns, coalesce(w.others, 0) AS others,
           coalesce(w.wait_ns / nullif(w.call_ns, 0), 0) AS wait_share
    FROM per p LEFT JOIN waits w USING (direction) WHERE p.aggregators > 0
)
SELECT CASE WHEN aggregators < nodes AND wait_share >= getvariable('aggregator_wait_share') THEN 'high'
            WHEN aggregators > nodes THEN 'high' WHEN aggregators < nodes THEN 'warning' ELSE 'ok' END AS severity,
       CASE WHEN aggregators < nodes THEN 'M08' WHEN aggregators > nodes THEN 'M09' ELSE 'M10' END AS drishti,
       printf('%s: %d aggregator%s for the %d node%s of the collective calls', direction, aggregators,
              CASE WHEN aggregators = 1 THEN '' ELSE 's' END, nodes, CASE WHEN nodes = 1 THEN '' ELSE 's' END)
       || CASE WHEN aggregators < nodes
               THEN printf(': the other ranks spent %s of their %d collective %ss'' %s waiting for them',
                           fmt_pct(wait_share), others, direction, fmt_ns(call_ns))
               WHEN aggregators > nodes THEN ' (several share a node''s link and memory)'
               ELSE ' (one per node, ROMIO''s default)' END AS detail,
       CASE WHEN aggregators <> nodes
            THEN printf('one aggregator per node: the hint cb_nodes %d (MPI_Info_set(info, "cb_nodes", "%d"), or a '
                        || 'line "cb_nodes %d" in the ROMIO_HINTS file)', nodes, nodes, nodes) END AS recommendation,
       {'direction': direction, 'aggregators': aggregators, 'nodes': nodes, 'calls': calls,
        'wait_ns': wait_ns, 'wait_share': round(wait_share, 4), 'impact': round(wait_share, 4)} AS numbers,
       agg_ranks AS ranks, []::UBIGINT[] AS callids, []::VARCHAR[] AS files, []::VARCHAR[] AS servers
FROM g
ORDER BY direction
