-- family: client
-- title: the job's collective buffering, read from its Darshan log's two DXT layers, against ROMIO's defaults
-- thresholds: -
-- columns: run.client.job.aggregation, run.client.job.hosts
-- On a replay of a Darshan log with both DXT layers (callid.replay.layers): per file and direction, the
-- ranks whose POSIX reads or writes lie under the collective MPI-IO calls (the job's aggregators) and their
-- largest piece (the buffer, when a cycle was full), against what ROMIO does by default: one aggregator per
-- node (cb_nodes = the nodes) and cb_buffer_size 16 MiB.  Warning: fewer aggregators than nodes (the
-- others' network links and disks idle); info: the default, or more than one per node.
WITH a AS (
    SELECT unnest(from_json(value, '[{"file": "VARCHAR", "io": "VARCHAR", "aggregators": "INTEGER[]",
                                      "max_piece": "BIGINT", "calls": "BIGINT", "bytes": "BIGINT"}]'),
                  recursive := true)
    FROM run WHERE key = 'client.job.aggregation'
), nodes AS (SELECT value::INTEGER AS nodes FROM run WHERE key = 'client.job.hosts')
SELECT CASE WHEN len(aggregators) < nodes THEN 'warning' ELSE 'info' END AS severity,
       printf('%s: the job''s %d collective %ss went through %d aggregators on its %d nodes (ROMIO''s default: '
              || 'one per node) in pieces of up to %s (default cb_buffer_size %s)', file, calls, io,
              len(aggregators), nodes, format_bytes(max_piece), format_bytes(getvariable('cb_buffer_size')::BIGINT))
           AS detail,
       CASE WHEN len(aggregators) < nodes
            THEN printf('let every node aggregate: MPI_Info_set(info, "cb_nodes", "%d") (or "cb_config_list" '
                        || '"*:1"); see what it changes on the servers with callid replay LOG --hint cb_nodes=%d',
                        nodes, nodes) END AS recommendation,
       {'aggregators': len(aggregators), 'nodes': nodes, 'max_piece_bytes': max_piece, 'calls': calls,
        'bytes': bytes} AS numbers,
       aggregators AS ranks, []::UBIGINT[] AS callids, [file] AS files, []::VARCHAR[] AS servers
FROM a, nodes
ORDER BY file, io
