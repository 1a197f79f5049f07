-- family: client
-- title: many small read or write requests
-- thresholds: small_share, small_count
-- drishti: P05, P06
-- columns: posix.POSIX_READS, POSIX_WRITES, POSIX_SIZE_READ_*, POSIX_SIZE_WRITE_* (under 1 MiB)
-- Per direction, over every POSIX record (Drishti's P05/P06): requests under 1 MiB; high when they are
-- more than small_share of the direction's requests and more than small_count.  The files named are
-- those holding more than half of small_share of the direction's requests in small ones (Drishti's).
WITH t AS (
    SELECT direction, k, sum(requests) AS total, sum(small) AS small FROM small_requests GROUP BY ALL
), f AS (SELECT direction, file, sum(small) AS small FROM small_requests GROUP BY ALL)
SELECT 'high' AS severity, CASE t.k WHEN 0 THEN 'P05' ELSE 'P06' END AS drishti,
       printf('%d small %s requests (under 1 MiB): %s of all %d %ss', t.small, t.direction,
              fmt_pct(t.small / t.total), t.total, t.direction) AS detail,
       'make each ' || t.direction || ' larger (buffer, then one request per MiB or more)'
       || CASE WHEN has_module('MPI-IO') THEN ', or use collective calls so that aggregators combine them'
               ELSE '; MPI-IO''s collective calls would combine them (the log shows no MPI-IO)' END
           AS recommendation,
       CASE t.k WHEN 0 THEN
'/* many ranks'' small pieces, one collective read: the aggregators read large blocks */
MPI_File_set_view(fh, disp, MPI_BYTE, filetype, "native", MPI_INFO_NULL);
MPI_File_read_all(fh, buf, count, MPI_BYTE, MPI_STATUS_IGNORE);'
       ELSE
'/* gather the small writes in memory, then one collective write per MiB or more */
MPI_File_write_at_all(fh, offset, buf, nbytes, MPI_BYTE, MPI_STATUS_IGNORE);' END AS example,
       {'direction': t.direction, 'requests': t.total, 'small': t.small,
        'small_share': round(t.small / t.total, 4)} AS numbers,
       []::BIGINT[] AS ranks, []::UBIGINT[] AS callids,
       (SELECT list(f.file ORDER BY f.small DESC, f.file) FROM f
        WHERE f.direction = t.direction AND f.small > t.total * getvariable('small_share') / 2) AS files,
       []::VARCHAR[] AS servers
FROM t
WHERE t.small > 0 AND t.small / t.total > getvariable('small_share') AND t.small > getvariable('small_count')
ORDER BY t.k
