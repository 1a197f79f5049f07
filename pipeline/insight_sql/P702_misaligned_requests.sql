-- family: client
-- title: requests not aligned to the file's strips
-- thresholds: misaligned_share
-- columns: calls.file_offset, calls.file, calls.hints (striping_unit), run.client.config (strip_size)
-- Drishti's P08 against the file system's alignment: here the file's strip size (its striping_unit
-- hint, else the run's --strip-size); high when more than misaligned_share of the data calls start
-- inside a strip.
WITH d AS (
    SELECT c.*, s.strip_size, c.file_offset % s.strip_size <> 0 AS misaligned
    FROM data_calls c JOIN file_layout s USING (file)
    WHERE c.file_offset IS NOT NULL
), totals AS (
    SELECT count(*) AS requests, count(*) FILTER (WHERE misaligned) AS misaligned,
           list(DISTINCT strip_size ORDER BY strip_size) AS strips
    FROM d
)
SELECT 'high' AS severity,
       printf('%d of %d requests (%s) start inside a strip (strip size %s)', misaligned, requests,
              fmt_pct(misaligned / requests), array_to_string(list_transform(strips, lambda x: format_bytes(x)), ', '))
           AS detail,
       -- (not "a striping_unit the offsets start on": for records 512 bytes off the strips that is 512 bytes)
       'align offsets and access sizes to the strip size (a view displacement or record size that is a multiple '
       || 'of it)' AS recommendation,
       {'requests': requests, 'misaligned': misaligned, 'misaligned_share': round(misaligned / requests, 4),
        'strip_size_bytes': strips[1]} AS numbers,
       (SELECT list(rank ORDER BY n DESC, rank) FROM (
            SELECT rank, count(*) AS n FROM d WHERE misaligned GROUP BY rank)) AS ranks,
       (SELECT list(callid ORDER BY t_start) FROM d WHERE misaligned AND callid IS NOT NULL) AS callids,
       (SELECT list(file ORDER BY n DESC, file) FROM (
            SELECT file, count(*) AS n FROM d WHERE misaligned GROUP BY file)) AS files,
       []::VARCHAR[] AS servers
FROM totals
WHERE requests > 0 AND misaligned > getvariable('misaligned_share') * requests
