-- family: server
-- title: fan-in hot spots: collective calls whose aggregators carry very unequal shares of the data
-- thresholds: aggregator_imbalance
-- columns: server_ops.rank, server_ops.callids, server_ops.size, calls.collective, calls.coll_seq, run.layout
-- A collective call is aggregated when a disk operation of it, sent by one rank (server_ops.rank), carries
-- another rank's CallID (the CallID's rank is callid >> counter bits of the run's layout TOTAL/RANK); its
-- aggregators are the ranks that sent its disk operations.  Per aggregator: the ranks it served, its disk
-- operations and bytes (read-modify-write reads included: its load on the servers); a hot spot when (max - min) / max of the aggregators' bytes is above
-- aggregator_imbalance: warning, one row per file (its most unequal collective).  Info: the fan-in over
-- every aggregated collective (ranks per aggregator).
WITH bits AS (
    SELECT (split_part(value, '/', 1)::INTEGER - split_part(value, '/', 2)::INTEGER) AS cb
    FROM run WHERE key = 'layout'
), ops AS (
    SELECT d.rank AS agg, d.size, d.callids, c.file, c.coll_seq, c.comm_id, c.func
    FROM disk_data d JOIN calls c ON c.callid = d.callids[1]
    WHERE c.collective AND d.rank >= 0
), served AS (
    SELECT o.file, o.coll_seq, o.comm_id, o.agg, count(DISTINCT u.id >> b.cb) AS ranks_served,
           bool_or((u.id >> b.cb) <> o.agg) AS others,
           list(DISTINCT u.id) AS ids
    FROM ops o, unnest(o.callids) AS u(id), bits b
    GROUP BY ALL
), per_agg AS (
    SELECT o.file, o.coll_seq, o.comm_id, o.agg, any_value(o.func) AS func, count(*) AS ops,
           sum(o.size)::BIGINT AS bytes, any_value(s.ranks_served) AS ranks_served, any_value(s.others) AS others,
           any_value(s.ids) AS ids
    FROM ops o JOIN served s USING (file, coll_seq, comm_id, agg)
    GROUP BY ALL
), coll AS (
    SELECT file, coll_seq, comm_id, any_value(func) AS func, count(*) AS aggregators,
           max(bytes) AS max_b, min(bytes) AS min_b, max(ops) AS max_o, min(ops) AS min_o,
           (max(bytes) - min(bytes)) / max(bytes) AS imbalance,
           list(agg ORDER BY bytes DESC, agg) AS aggs,
           list({'agg': agg, 'bytes': bytes, 'ops': ops, 'ranks': ranks_served} ORDER BY bytes DESC, agg) AS detail,
           arg_max(ids, (bytes, -agg)) AS hot_ids,
           sum(ranks_served) AS fanin, max(ranks_served) AS max_fanin
    FROM per_agg GROUP BY file, coll_seq, comm_id
    HAVING bool_or(others) AND max(bytes) > 0
), hot AS (
    SELECT *, imbalance > getvariable('aggregator_imbalance') AS is_hot FROM coll
), agg_ranks AS (
    SELECT file AS a_file, count(DISTINCT agg) AS agg_ranks
    FROM per_agg JOIN coll USING (file, coll_seq, comm_id) GROUP BY GROUPING SETS ((file), ())
), summary AS (  -- per file (its hot collectives) and over all (NULL file: every aggregated collective)
    SELECT file, count(*) AS collectives, count(*) FILTER (WHERE is_hot) AS hot,
           sum(fanin) / sum(aggregators) AS fanin_mean, max(max_fanin) AS fanin_max,
           arg_max({'coll_seq': coll_seq, 'func': func, 'aggregators': aggregators, 'max_b': max_b,
                    'min_b': min_b, 'max_o': max_o, 'min_o': min_o, 'imbalance': imbalance, 'aggs': aggs,
                    'detail': detail, 'hot_ids': hot_ids}, (imbalance, max_b, -coll_seq)) AS w,
           list(DISTINCT file) AS files
    FROM hot GROUP BY GROUPING SETS ((file), ())
)
SELECT CASE WHEN file IS NULL THEN 'info' ELSE 'warning' END AS severity,
       CASE WHEN file IS NULL
            THEN printf('aggregated collective calls: %d, by %d aggregator ranks, each serving %.2f ranks on average '
                        || '(at most %d); with a hot aggregator: %d', collectives, agg_ranks, fanin_mean, fanin_max,
                        hot)
            ELSE printf('aggregated collective calls on %s with a hot aggregator: %d of %d; the most unequal (%s, '
                        || 'coll_seq %d): ', file, hot, collectives, w.func, w.coll_seq)
                 || array_to_string(list_transform(w.detail[:4], lambda x: printf('aggregator rank %d moved %s for %d '
                                                                             || 'ranks in %d disk ops', x.agg,
                                                                             format_bytes(x.bytes), x.ranks, x.ops)),
                                    ', ')
                 || CASE WHEN w.aggregators > 4 THEN printf(', ... (%d aggregators)', w.aggregators) ELSE '' END
                 || printf(': imbalance %s', fmt_pct(w.imbalance)) END AS detail,
       CASE WHEN file IS NOT NULL
            THEN printf('spread the data over the file domains: more aggregators (cb_nodes, now %d) or a smaller '
                        || 'cb_buffer_size, or lay the ranks'' data out evenly over the range the collective covers',
                        w.aggregators) END AS recommendation,
       {'collectives': collectives, 'hot_collectives': hot, 'coll_seq': w.coll_seq, 'aggregators': w.aggregators,
        'ranks_per_aggregator': round(fanin_mean, 4), 'max_ranks_per_aggregator': fanin_max,
        'max_bytes': w.max_b, 'min_bytes': w.min_b, 'max_ops': w.max_o, 'min_ops': w.min_o,
        'imbalance_share': round(w.imbalance, 4)} AS numbers,
       CASE WHEN file IS NULL THEN []::INTEGER[] ELSE w.aggs::INTEGER[] END AS ranks,
       CASE WHEN file IS NULL THEN []::UBIGINT[] ELSE list_sort(w.hot_ids) END AS callids,
       CASE WHEN file IS NULL THEN list_sort(files) ELSE [file] END AS files,
       []::VARCHAR[] AS servers
FROM summary s LEFT JOIN agg_ranks a ON a.a_file IS NOT DISTINCT FROM s.file
WHERE s.collectives > 0 AND (s.file IS NULL OR s.hot > 0)
ORDER BY file IS NULL, file
