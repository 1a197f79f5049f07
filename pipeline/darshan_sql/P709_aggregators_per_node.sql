-- family: client
-- title: MPI-IO aggregators (cb_nodes) against the job's compute nodes
-- thresholds: -
-- drishti: M08, M09, M10
-- columns: job.metadata.h (cb_nodes), hosts.host (the DXT records' host names)
-- Drishti's M08-M10, when the log has MPI-IO: cb_nodes from the hints the job's metadata records, against
-- the number of compute nodes: more aggregators than nodes M09 (Drishti: high, inter-node aggregators),
-- fewer M08, as many M10 (both ok).  Drishti asks SLURM's sacct for the nodes (so it decides nothing
-- elsewhere); here they are the distinct host names of the log's DXT records.  The hints the metadata
-- records are those Darshan wrote its own log with (DARSHAN_LOGHINTS, cb_nodes=4 by default), not the
-- program's (a Darshan log holds none of those): so the finding is info, saying so, whatever it compares.
WITH hints AS (
    SELECT TRY_CAST(regexp_extract(value, '(^|;)cb_nodes=([0-9]+)', 2) AS BIGINT) AS cb_nodes
    FROM job WHERE key = 'metadata.h'
), nodes AS (SELECT count(DISTINCT host) AS n FROM hosts
), t AS (SELECT (SELECT cb_nodes FROM hints) AS cb_nodes, nodes.n FROM nodes)
SELECT 'info' AS severity,
       CASE WHEN cb_nodes IS NULL OR n = 0 THEN NULL WHEN cb_nodes > n THEN 'M09' WHEN cb_nodes < n THEN 'M08'
            ELSE 'M10' END AS drishti,
       CASE WHEN cb_nodes IS NULL THEN 'not decided: the log records no cb_nodes hint'
            WHEN n = 0 THEN printf('not decided: cb_nodes=%d, but the log names no hosts (it has no DXT records)',
                                   cb_nodes)
            ELSE printf('cb_nodes=%d on %d node(s): %s, but this cb_nodes is the hint Darshan wrote its own log '
                        'with, not the program''s (a Darshan log records none of those)', cb_nodes, n,
                        CASE WHEN cb_nodes > n THEN 'aggregators share nodes and exchange data over the network'
                             WHEN cb_nodes < n THEN 'fewer aggregators than nodes'
                             ELSE 'one aggregator per node' END) END AS detail,
       CASE WHEN cb_nodes > n AND n > 0 THEN printf('if the program''s collective calls ran with this cb_nodes too, '
                                                    'set it to the number of nodes (%d)', n) END AS recommendation,
       CASE WHEN cb_nodes > n AND n > 0 THEN printf('export ROMIO_HINTS=$PWD/romio-hints   # read by ROMIO at MPI_File_open
echo "cb_nodes %d" > romio-hints', n) END AS example,
       {'cb_nodes': cb_nodes, 'nodes': n} AS numbers,
       []::BIGINT[] AS ranks, []::UBIGINT[] AS callids, []::VARCHAR[] AS files, []::VARCHAR[] AS servers
FROM t
WHERE has_module('MPI-IO')
