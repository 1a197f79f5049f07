-- family: server
-- title: accesses crossing strip boundaries they need not cross, and the extra disk operations they cost
-- thresholds: crossing_share
-- columns: calls.file_offset, calls.size, calls.region_offsets, calls.collective, calls.hints, fanout.disk_ops
-- Per direction, over the independent contiguous data calls (region_offsets empty): a call crosses when
-- its range [file_offset, file_offset + size) touches more strips than ceil(size / strip) needs (strip:
-- the striping_unit hint of the file's first open that gave one, else the run's strip size).  High when
-- crossing calls are more than crossing_share of the calls, info otherwise.  Their disk operations
-- (fanout.disk_ops) are set against those of the aligned calls (offset a multiple of the strip) of
-- the same sizes, where there are any.
WITH c AS (
    SELECT d.callid, d.rank, d.file, d.direction, d.size, d.file_offset, s.strip,
           (d.file_offset + d.size - 1) // s.strip - d.file_offset // s.strip + 1 AS touched,
           (d.size + s.strip - 1) // s.strip AS needed,
           d.file_offset % s.strip = 0 AS aligned, f.disk_ops
    FROM data_calls d
    JOIN (SELECT file, strip_size AS strip FROM file_layout) s USING (file)
    LEFT JOIN fanout f ON f.callid = d.callid
    WHERE coalesce(len(d.region_offsets), 0) = 0 AND NOT coalesce(d.collective, false) AND d.file_offset >= 0
), crossing AS (
    SELECT * FROM c WHERE touched > needed
), per_dir AS (
    SELECT direction, count(*) AS calls FROM c GROUP BY direction
), x AS (
    SELECT direction, count(*) AS crossing, sum(touched)::BIGINT AS touched, sum(needed)::BIGINT AS needed,
           coalesce(sum(disk_ops), 0)::BIGINT AS disk_ops,
           (list(callid ORDER BY disk_ops DESC NULLS LAST, callid) FILTER (WHERE callid IS NOT NULL)) AS callids,
           mode(strip) AS strip
    FROM crossing GROUP BY direction
), aligned AS (  -- aligned calls of the sizes that cross
    SELECT c.direction, count(*) AS calls, coalesce(sum(c.disk_ops), 0)::BIGINT AS disk_ops
    FROM c WHERE c.aligned AND c.size IN (SELECT k.size FROM crossing k WHERE k.direction = c.direction)
    GROUP BY c.direction
), top_files AS (
    SELECT direction, list(file ORDER BY n DESC, file) AS files
    FROM (SELECT direction, file, count(*) AS n FROM crossing GROUP BY ALL) GROUP BY direction
), top_ranks AS (
    SELECT direction, list(rank ORDER BY n DESC, rank) AS ranks
    FROM (SELECT direction, rank, count(*) AS n FROM crossing GROUP BY ALL) GROUP BY direction
)
SELECT CASE WHEN x.crossing > getvariable('crossing_share') * p.calls THEN 'high' ELSE 'info' END AS severity,
       printf('%d of %d contiguous independent %s calls (%s) cross strip boundaries they need not: %d strips '
              || 'touched where %d would do (%d extra); they caused %d disk ops (%.2f per call)',
              x.crossing, p.calls, x.direction, fmt_pct(x.crossing / p.calls), x.touched, x.needed,
              x.touched - x.needed, x.disk_ops, x.disk_ops / x.crossing)
       || CASE WHEN a.calls > 0
               THEN printf(', %d aligned calls of the same sizes %d (%.2f per call)', a.calls, a.disk_ops,
                           a.disk_ops / a.calls)
               ELSE '' END AS detail,
       CASE WHEN x.crossing > getvariable('crossing_share') * p.calls
            THEN printf('align the offsets to the striping_unit (%s) and make the access sizes a multiple of it, '
                        || 'or set striping_unit (hint) / --strip-size to the access size', format_bytes(x.strip)) END
           AS recommendation,
       {'direction': x.direction, 'calls': p.calls, 'crossing': x.crossing,
        'crossing_share': round(x.crossing / p.calls, 4), 'strip_bytes': x.strip, 'strips_touched': x.touched,
        'strips_needed': x.needed, 'extra_strips': x.touched - x.needed, 'disk_ops': x.disk_ops,
        'aligned_calls': coalesce(a.calls, 0), 'aligned_disk_ops': coalesce(a.disk_ops, 0)} AS numbers,
       coalesce(r.ranks, []) AS ranks, coalesce(x.callids, []) AS callids, coalesce(f.files, []) AS files,
       []::VARCHAR[] AS servers
FROM x JOIN per_dir p USING (direction) LEFT JOIN aligned a USING (direction)
LEFT JOIN top_files f USING (direction) LEFT JOIN top_ranks r USING (direction)
ORDER BY x.direction
