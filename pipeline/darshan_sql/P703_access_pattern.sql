-- family: client
-- title: random access rather than sequential or consecutive
-- thresholds: random_share, random_count
-- drishti: P11, P12, P13, P14
-- columns: posix.POSIX_READS, POSIX_WRITES, POSIX_CONSEC_*, POSIX_SEQ_*
-- Darshan's counters over every POSIX record: consecutive (starts where the previous request ended),
-- sequential (starts after it, consecutive ones included), random (the rest).  Drishti's P11/P13: high
-- when random requests are more than random_share and more than random_count; otherwise P12/P14, ok.
WITH t AS (
    SELECT d.direction, d.k,
           sum(CASE d.k WHEN 0 THEN POSIX_READS ELSE POSIX_WRITES END) AS total,
           sum(CASE d.k WHEN 0 THEN POSIX_CONSEC_READS ELSE POSIX_CONSEC_WRITES END) AS consecutive,
           sum(CASE d.k WHEN 0 THEN POSIX_SEQ_READS ELSE POSIX_SEQ_WRITES END) AS seq
    FROM posix, directions d GROUP BY ALL
), c AS (
    SELECT *, seq - consecutive AS sequential, total - seq AS random,
           total - seq > 0 AND (total - seq) / total > getvariable('random_share')
               AND total - seq > getvariable('random_count') AS flagged
    FROM t WHERE total > 0
)
SELECT CASE WHEN flagged THEN 'high' ELSE 'ok' END AS severity,
       CASE WHEN flagged THEN CASE k WHEN 0 THEN 'P11' ELSE 'P13' END
            ELSE CASE k WHEN 0 THEN 'P12' ELSE 'P14' END END AS drishti,
       CASE WHEN flagged THEN printf('%d random %s requests (%s of %d)', random, direction,
                                     fmt_pct(random / total), total)
            ELSE printf('%d %s requests: %s consecutive, %s sequential, %s random (%d: not over both %s and %d)',
                        total, direction, fmt_pct(consecutive / total), fmt_pct(sequential / total),
                        fmt_pct(random / total), random, fmt_pct(getvariable('random_share')),
                        getvariable('random_count')::BIGINT)
       END AS detail,
       CASE WHEN flagged THEN 'order the ' || direction || 's by offset (sort, or one collective call that '
                              || 'lets the aggregators order them), or lay the data out in access order' END
           AS recommendation,
       CASE WHEN flagged THEN
'/* scattered pieces of one rank: describe them once, access them in one call */
MPI_Type_create_indexed_block(n, blocklen, displs, MPI_BYTE, &filetype);
MPI_Type_commit(&filetype);
MPI_File_set_view(fh, 0, MPI_BYTE, filetype, "native", MPI_INFO_NULL);' END AS example,
       {'direction': direction, 'requests': total, 'consecutive': consecutive, 'sequential': sequential,
        'random': random, 'random_share': round(random / total, 4)} AS numbers,
       []::BIGINT[] AS ranks, []::UBIGINT[] AS callids, []::VARCHAR[] AS files, []::VARCHAR[] AS servers
FROM c ORDER BY k
