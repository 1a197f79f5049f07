-- family: client
-- title: independent MPI-IO calls and no collective ones
-- thresholds: independent_share, independent_count
-- drishti: M02, M03, M04, M05
-- columns: mpiio.MPIIO_COLL_READS, MPIIO_COLL_WRITES, MPIIO_INDEP_READS, MPIIO_INDEP_WRITES
-- Drishti's M02/M03 per direction over every MPI-IO record: no collective call and more than
-- independent_count independent ones: high, naming the records where that direction's independent calls
-- are more than independent_share of the record's independent calls and those more than independent_count;
-- M04/M05, ok, when collective calls are used.
WITH t AS (
    SELECT d.direction, d.k,
           sum(CASE d.k WHEN 0 THEN MPIIO_COLL_READS ELSE MPIIO_COLL_WRITES END) AS coll,
           sum(CASE d.k WHEN 0 THEN MPIIO_INDEP_READS ELSE MPIIO_INDEP_WRITES END) AS indep
    FROM mpiio, directions d GROUP BY ALL
), f AS (
    SELECT d.k, file, rank, CASE d.k WHEN 0 THEN MPIIO_INDEP_READS ELSE MPIIO_INDEP_WRITES END AS n,
           MPIIO_INDEP_READS + MPIIO_INDEP_WRITES AS both_ways
    FROM mpiio, directions d
)
SELECT CASE WHEN coll > 0 THEN 'ok' ELSE 'high' END AS severity,
       CASE WHEN coll > 0 THEN CASE k WHEN 0 THEN 'M04' ELSE 'M05' END
            ELSE CASE k WHEN 0 THEN 'M02' ELSE 'M03' END END AS drishti,
       CASE WHEN coll > 0 THEN printf('%d collective %s calls (%s of the %d MPI-IO %ss)', coll, direction,
                                      fmt_pct(coll / (coll + indep)), coll + indep, direction)
            ELSE printf('no collective %s: %d independent MPI-IO %s calls', direction, indep, direction) END
           AS detail,
       CASE WHEN coll = 0 THEN 'use the collective ' || direction || ' calls (MPI_File_' || direction
                               || '_all, _at_all): ROMIO''s aggregators then combine the ranks'' requests' END
           AS recommendation,
       CASE WHEN coll = 0 THEN printf('/* instead of MPI_File_%s_at(fh, off, buf, n, MPI_BYTE, &st) on every rank: */
MPI_File_%s_at_all(fh, off, buf, n, MPI_BYTE, MPI_STATUS_IGNORE);', direction, direction) END AS example,
       {'direction': direction, 'collective': coll, 'independent': indep} AS numbers,
       []::BIGINT[] AS ranks, []::UBIGINT[] AS callids,
       CASE WHEN coll = 0 THEN (SELECT list(DISTINCT f.file) FROM f WHERE f.k = t.k AND f.both_ways > 0
                                AND f.n / f.both_ways > getvariable('independent_share')
                                AND f.both_ways > getvariable('independent_count')) ELSE [] END AS files,
       []::VARCHAR[] AS servers
FROM t
WHERE coll > 0 OR coll + indep > getvariable('independent_count')
ORDER BY k
