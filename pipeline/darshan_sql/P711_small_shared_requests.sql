-- family: client
-- title: many small requests to shared files
-- thresholds: small_share, small_count
-- drishti: P15, P16
-- columns: posix (shared records, rank -1).POSIX_READS, POSIX_WRITES, POSIX_SIZE_READ_*, POSIX_SIZE_WRITE_*
-- Drishti's P15/P16 on the files every rank opened (Darshan's shared records, rank -1): requests under
-- 1 MiB; high when they are more than small_share of the shared files' requests and more than
-- small_count.  The files named hold more than half of small_share of them.
WITH t AS (
    SELECT direction, k, sum(requests) AS total, sum(small) AS small FROM small_requests WHERE rank = -1
    GROUP BY ALL
), f AS (SELECT direction, file, sum(small) AS small FROM small_requests WHERE rank = -1 GROUP BY ALL)
SELECT 'high' AS severity, CASE t.k WHEN 0 THEN 'P15' ELSE 'P16' END AS drishti,
       printf('%d small %s requests (under 1 MiB) to shared files: %s of their %d %ss', t.small, t.direction,
              fmt_pct(t.small / t.total), t.total, t.direction) AS detail,
       'use collective calls on the shared files (the aggregators turn many small requests into few large '
       || 'ones; cb_buffer_size, cb_nodes), or have each rank ' || t.direction || ' one large block' AS recommendation,
       printf('/* collective buffering on: many ranks'' small %ss become large ones */
MPI_Info_set(info, "romio_cb_%s", "enable");
MPI_File_open(comm, path, amode, info, &fh);
MPI_File_%s_at_all(fh, offset, buf, count, MPI_BYTE, MPI_STATUS_IGNORE);', t.direction, t.direction, t.direction)
           AS example,
       {'direction': t.direction, 'requests': t.total, 'small': t.small,
        'small_share': round(t.small / t.total, 4)} AS numbers,
       []::BIGINT[] AS ranks, []::UBIGINT[] AS callids,
       (SELECT list(f.file ORDER BY f.small DESC, f.file) FROM f
        WHERE f.direction = t.direction AND f.small > t.total * getvariable('small_share') / 2) AS files,
       []::VARCHAR[] AS servers
FROM t
WHERE t.total > 0 AND t.small / t.total > getvariable('small_share') AND t.small > getvariable('small_count')
ORDER BY t.k
