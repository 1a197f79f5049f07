-- family: client
-- title: the mix of reads and writes (by requests and by bytes)
-- thresholds: rw_imbalance
-- drishti: P01, P02, P03, P04
-- columns: posix.POSIX_READS, POSIX_WRITES, POSIX_BYTES_READ, POSIX_BYTES_WRITTEN
-- Drishti's P01/P02 (requests) and P03/P04 (bytes) over every POSIX record: write (read) intensive when
-- writes (reads) outnumber the other by more than rw_imbalance of all; info either way.
WITH t AS (
    SELECT 'requests' AS what, sum(POSIX_READS) AS r, sum(POSIX_WRITES) AS w FROM posix
    UNION ALL
    SELECT 'bytes', sum(POSIX_BYTES_READ), sum(POSIX_BYTES_WRITTEN) FROM posix
)
SELECT 'info' AS severity,
       CASE what WHEN 'requests' THEN CASE WHEN w > r THEN 'P01' ELSE 'P02' END
                 ELSE CASE WHEN w > r THEN 'P03' ELSE 'P04' END END AS drishti,
       printf('%s intensive by %s: %s writes, %s reads', CASE WHEN w > r THEN 'write' ELSE 'read' END, what,
              fmt_pct(w / (r + w)), fmt_pct(r / (r + w)))
       || CASE what WHEN 'bytes' THEN printf(' (%s written, %s read)', format_bytes(w::BIGINT), format_bytes(r::BIGINT))
               ELSE printf(' (%d writes, %d reads)', w, r) END AS detail,
       NULL AS recommendation, NULL AS example,
       {'measure': what, 'reads': r, 'writes': w, 'write_share': round(w / (r + w), 4)} AS numbers,
       []::BIGINT[] AS ranks, []::UBIGINT[] AS callids, []::VARCHAR[] AS files, []::VARCHAR[] AS servers
FROM t
WHERE r + w > 0 AND w <> r AND abs(w - r) / (r + w) > getvariable('rw_imbalance')
ORDER BY what DESC
