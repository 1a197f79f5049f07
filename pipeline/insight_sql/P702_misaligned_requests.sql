-- family: client
-- title: requests not aligned to the file's strips
-- thresholds: misaligned_share
-- columns: calls.file_offset, calls.size, calls.file, calls.hints (striping_unit), run.client.config (strip_size)
-- Drishti's P08 against the file system's alignment: here the file's strip size (its striping_unit
-- hint, else the run's --strip-size); high when more than misaligned_share of the data calls start
-- inside a strip.  Advised besides: a striping_unit of the record size (the most common size of the
-- misaligned requests), when every misaligned request starts at a multiple of it and callid run takes
-- it (not for records 512 bytes off the strips: no strip size aligns them but 512 bytes).
WITH d AS (
    SELECT c.*, s.strip_size, c.file_offset % s.strip_size <> 0 AS misaligned
    FROM data_calls c JOIN file_layout s USING (file)
    WHERE c.file_offset IS NOT NULL
), totals AS (
    SELECT count(*) AS requests, count(*) FILTER (WHERE misaligned) AS misaligned,
           list(DISTINCT strip_size ORDER BY strip_size) AS strips,
           mode(size) FILTER (WHERE misaligned) AS record
    FROM d
), advised AS (
    SELECT t.*, CASE WHEN t.record BETWEEN getvariable('min_strip_size') AND getvariable('max_strip_size')
                      AND NOT EXISTS (SELECT 1 FROM d WHERE misaligned AND file_offset % t.record <> 0)
                     THEN t.record END AS strip
    FROM totals t
)
SELECT 'high' AS severity,
       'P08' AS drishti,
       printf('%d of %d requests (%s) start inside a strip (strip size %s)', misaligned, requests,
              fmt_pct(misaligned / requests), array_to_string(list_transform(strips, lambda x: format_bytes(x)), ', '))
           AS detail,
       'align offsets and access sizes to the strip size (a view displacement or record size that is a multiple '
       || 'of it)' || CASE WHEN strip IS NOT NULL
                           THEN printf(', or a striping_unit of the record size (%s), on which every one of '
                                       || 'them starts: the hint, or callid run --strip-size %s',
                                       format_bytes(strip), size_arg(strip))
                           ELSE '' END AS recommendation,
       {'requests': requests, 'misaligned': misaligned, 'misaligned_share': round(misaligned / requests, 4),
        'strip_size_bytes': strips[1], 'advised_strip_bytes': strip} AS numbers,
       (SELECT list(rank ORDER BY n DESC, rank) FROM (
            SELECT rank, count(*) AS n FROM d WHERE misaligned GROUP BY rank)) AS ranks,
       (SELECT list(callid ORDER BY t_start) FROM d WHERE misaligned AND callid IS NOT NULL) AS callids,
       (SELECT list(file ORDER BY n DESC, file) FROM (
            SELECT file, count(*) AS n FROM d WHERE misaligned GROUP BY file)) AS files,
       []::VARCHAR[] AS servers
FROM advised
WHERE requests > 0 AND misaligned > getvariable('misaligned_share') * requests
