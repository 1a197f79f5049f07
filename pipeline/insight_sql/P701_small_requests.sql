-- family: client
-- title: many small read or write requests
-- thresholds: small_bytes, small_share, small_count
-- columns: calls.func, calls.size, calls.rank, calls.file
-- Per direction (Drishti's P05/P06): data calls under small_bytes; high when they are more than
-- small_share of the direction's calls and more than small_count.
WITH d AS (
    SELECT direction, count(*) AS calls, count(*) FILTER (WHERE size < getvariable('small_bytes')) AS small
    FROM data_calls GROUP BY direction
), top_files AS (
    SELECT direction, list(file ORDER BY n DESC, file) AS files
    FROM (SELECT direction, file, count(*) AS n FROM data_calls WHERE size < getvariable('small_bytes')
          GROUP BY ALL) GROUP BY direction
), top_ranks AS (
    SELECT direction, list(rank ORDER BY n DESC, rank) AS ranks
    FROM (SELECT direction, rank, count(*) AS n FROM data_calls WHERE size < getvariable('small_bytes')
          GROUP BY ALL) GROUP BY direction
)
SELECT CASE WHEN small > getvariable('small_count') THEN 'high' ELSE 'info' END AS severity,
       CASE WHEN small > getvariable('small_count') THEN CASE direction WHEN 'read' THEN 'P05' ELSE 'P06' END
       END AS drishti,
       printf('%d of %d %s requests (%s) are smaller than %s', small, calls, direction,
              fmt_pct(small / calls), format_bytes(getvariable('small_bytes')::BIGINT))
       || CASE WHEN small > getvariable('small_count') THEN ''
               ELSE printf(' (not flagged: %d or fewer)', getvariable('small_count')::BIGINT) END AS detail,
       CASE WHEN small > getvariable('small_count')
            THEN 'make each ' || direction || ' larger (buffer, then one call per MiB or more), or use '
                 || 'collective calls so that aggregators combine them (cb_nodes, cb_buffer_size)' END
           AS recommendation,
       {'direction': direction, 'requests': calls, 'small': small,
        'small_share': round(small / calls, 4)} AS numbers,
       coalesce(r.ranks, []) AS ranks, []::UBIGINT[] AS callids, coalesce(f.files, []) AS files,
       []::VARCHAR[] AS servers
FROM d LEFT JOIN top_files f USING (direction) LEFT JOIN top_ranks r USING (direction)
WHERE small > getvariable('small_share') * calls
ORDER BY direction
