-- family: server
-- title: stragglers: calls much slower than their peers, and the disk operations that made them slow
-- thresholds: straggler_factor, rank_imbalance
-- columns: calls.func, calls.size, calls.t_start, calls.t_end, calls.coll_seq, arrows.callid, arrows.server, arrows.event_id, arrows.op, arrows.dur_ns
-- Peers: independent data calls of the same function and size; a collective counts as one (its
-- calls' sizes summed), timed from its last rank's arrival to its last return (so that waiting for
-- late ranks, P706, does not count).  A straggler takes more than straggler_factor x its peers' median
-- time.  Its disk time: the union of the intervals of the disk operations of its calls (arrows; operations
-- that overlap, on several servers, count once).  The one rule for "slow on the disks": a straggler whose
-- disk time beyond its peers' median alone makes it a straggler (median time + extra disk time >
-- straggler_factor x median time).  Warning when the time
-- those lost (their time - the median) is more than rank_imbalance (Drishti's straggler margin) of the
-- time of all the peers; info otherwise (a few slow calls, or time lost outside the servers: client,
-- network, scheduling).  One row per function and size (the 10 that lost the most time), naming the
-- worst straggler's longest disk operation.
WITH units AS (  -- what is timed: an independent call, or a whole collective (coll: its number)
    SELECT func, size, NULL::BIGINT AS coll, [callid] AS callids, [rank] AS ranks, file, t_end - t_start AS ns
    FROM data_calls WHERE callid IS NOT NULL AND NOT (collective AND coll_seq IS NOT NULL)
    UNION ALL
    SELECT any_value(func), sum(size)::BIGINT, coll_seq, list(callid ORDER BY rank), list(rank ORDER BY rank),
           any_value(file), max(t_end) - max(t_start)
    FROM data_calls WHERE callid IS NOT NULL AND collective AND coll_seq IS NOT NULL GROUP BY coll_seq
), peers AS (  -- (the peers' figures by aggregate, joined: a window per function and size sorts them all)
    SELECT row_number() OVER () AS unit, *  -- (an identifier: in no order)
    FROM units JOIN (SELECT func, size, median(ns) AS median_ns, count(*) AS peers, sum(ns) AS peers_ns
                     FROM units GROUP BY func, size) USING (func, size)
), grouped AS (  -- the units of the functions and sizes that have stragglers
    SELECT * FROM peers p WHERE EXISTS (SELECT 1 FROM peers q WHERE q.func = p.func AND q.size = p.size
                                         AND q.ns > getvariable('straggler_factor') * q.median_ns)
), ops AS (  -- their disk operations, each once per unit
    SELECT DISTINCT g.unit, a.server, a.event_id, a.op, a.dur_ns, a.t_end
    FROM (SELECT unit, unnest(callids) AS callid FROM grouped) g JOIN arrows a USING (callid)
), spans AS (SELECT unit AS k, t_end - dur_ns AS lo, t_end AS hi FROM ops
), work AS (
    SELECT unit, count(*) AS disk_ops, any_value(c.covered)::BIGINT AS disk_ns,
           arg_max({'server': server, 'event_id': event_id, 'op': op, 'dur_ns': dur_ns}, (dur_ns, t_end))
               AS slow
    FROM ops JOIN covered('spans') c ON c.k = ops.unit GROUP BY unit
), judged AS (
    SELECT g.*, coalesce(w.disk_ops, 0) AS disk_ops, coalesce(w.disk_ns, 0) AS disk_ns, w.slow,
           median(coalesce(w.disk_ops, 0)) OVER p AS median_disk_ops,
           median(coalesce(w.disk_ns, 0)) OVER p AS median_disk_ns
    FROM grouped g LEFT JOIN work w USING (unit) WINDOW p AS (PARTITION BY g.func, g.size)
), stragglers AS (  -- (each named: an independent call by its CallID and rank)
    SELECT *, median_ns + disk_ns - median_disk_ns > getvariable('straggler_factor') * median_ns AS on_disk,
           CASE WHEN coll IS NULL THEN callid_hex(callids[1]) || ' on rank ' || ranks[1]
                ELSE printf('collective %d (%d ranks)', coll, len(ranks)) END AS label
    FROM judged WHERE ns > getvariable('straggler_factor') * median_ns
), ranked AS (  -- the stragglers of a group, the worst first: on the disks, then the slowest
    SELECT *, row_number() OVER (PARTITION BY func, size ORDER BY on_disk DESC, ns DESC, label) AS pos
    FROM stragglers
), per_group AS (
    SELECT func, size, any_value(peers) AS peers, any_value(median_ns) AS median_ns,
           any_value(peers_ns)::BIGINT AS peers_ns, count(*) AS stragglers,
           count(*) FILTER (WHERE on_disk) AS disk_stragglers, sum(ns - median_ns)::BIGINT AS lost_ns,
           coalesce(sum(ns - median_ns) FILTER (WHERE on_disk), 0)::BIGINT AS disk_lost_ns,
           arg_min(r, pos) AS w, flatten(list(callids ORDER BY pos)) AS callids
    FROM ranked r GROUP BY func, size
), named AS (  -- ranks, files and servers (of the longest disk operation) of each group's stragglers
    SELECT func, size, 'rank' AS what, rank, NULL AS name, min(pos) AS pos
    FROM (SELECT func, size, pos, unnest(ranks) AS rank FROM ranked) GROUP BY ALL
    UNION ALL SELECT func, size, 'file', NULL, file, min(pos) FROM ranked WHERE file IS NOT NULL GROUP BY ALL
    UNION ALL
    SELECT func, size, 'server', NULL, slow.server, min(pos) FROM ranked WHERE slow IS NOT NULL GROUP BY ALL
), lists AS (
    SELECT func, size, list(rank ORDER BY pos, rank) FILTER (WHERE what = 'rank') AS ranks,
           list(name ORDER BY pos, name) FILTER (WHERE what = 'file') AS files,
           list(name ORDER BY pos, name) FILTER (WHERE what = 'server') AS servers
    FROM named GROUP BY func, size
)
SELECT CASE WHEN flagged THEN 'warning' ELSE 'info' END AS severity,
       printf('%s of %s: %d of %d calls took more than %gx their median %s; %s. Slowest%s: %s, %s, %d disk '
              || 'operations (median %g), disk time %s (median %s; overlapping operations once)%s', func, format_bytes(size), stragglers, peers,
              getvariable('straggler_factor'), fmt_ns(median_ns),
              CASE WHEN disk_stragglers = 0 THEN 'none slow on the disks (the disk time beyond the median '
                                                 || 'would not alone make one a straggler: the time went to the '
                                                 || 'client, the network or scheduling)'
                   ELSE printf('%d slow on the disks lost %s (%s of the peers'' %s)', disk_stragglers,
                               fmt_ns(disk_lost_ns), fmt_pct(disk_lost_ns / nullif(peers_ns, 0)), fmt_ns(peers_ns))
                   END,
              CASE WHEN disk_stragglers > 0 THEN ' on the disks' ELSE '' END, w.label, fmt_ns(w.ns), w.disk_ops,
              w.median_disk_ops, fmt_ns(w.disk_ns), fmt_ns(w.median_disk_ns),
              CASE WHEN w.slow IS NOT NULL THEN printf('; longest: %s #%d on %s, %s', w.slow.op, w.slow.event_id,
                                                       w.slow.server, fmt_ns(w.slow.dur_ns))
                   ELSE '' END) AS detail,
       CASE WHEN flagged
            THEN 'look at the slow disk operation''s server (its load: S801) and at what the straggler asks of '
                 || 'it: the access shape of its peers (contiguous, one request per server), fewer disk '
                 || 'operations per call' END AS recommendation,
       {'func': func, 'peers': peers, 'stragglers': stragglers, 'disk_stragglers': disk_stragglers,
        'median_ns': median_ns::BIGINT, 'peers_ns': peers_ns, 'lost_ns': lost_ns,
        'disk_lost_ns': disk_lost_ns,
        'disk_lost_share': round(coalesce(disk_lost_ns / nullif(peers_ns, 0), 0), 4), 'call_ns': w.ns,
        'disk_ops': w.disk_ops, 'median_disk_ops': w.median_disk_ops::DOUBLE, 'disk_ns': w.disk_ns,
        'median_disk_ns': w.median_disk_ns::BIGINT, 'slow_op_ns': w.slow.dur_ns,
        'slow_op_event_id': w.slow.event_id} AS numbers,
       coalesce(l.ranks, []) AS ranks, callids::UBIGINT[] AS callids, coalesce(l.files, []) AS files,
       coalesce(l.servers, []) AS servers
FROM (SELECT *, disk_lost_ns > getvariable('rank_imbalance') * peers_ns AS flagged FROM per_group)
     LEFT JOIN lists l USING (func, size)
ORDER BY flagged DESC, disk_lost_ns DESC, lost_ns DESC, func, size
LIMIT 10
