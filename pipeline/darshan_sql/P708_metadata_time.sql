-- family: client
-- title: time in metadata operations (open, stat, seek, sync, close, ...)
-- thresholds: metadata_rank_ns
-- drishti: P17
-- columns: posix.POSIX_F_META_TIME
-- Drishti's P17: high when a POSIX record's metadata time is over metadata_rank_ns (30 s).  A record is
-- one file on one rank, or a shared file on all ranks (its time the sum over them): Drishti counts them
-- as ranks.
WITH slow AS (SELECT * FROM posix WHERE POSIX_F_META_TIME * 1e9 > getvariable('metadata_rank_ns'))
SELECT 'high' AS severity, 'P17' AS drishti,
       printf('%d record(s) (a file on a rank, or a shared file over all ranks) spent over %.0f s in metadata '
              'operations, %.1f s at most', count(*), getvariable('metadata_rank_ns') / 1e9,
              max(POSIX_F_META_TIME)) AS detail,
       'open, stat and close fewer files: one shared file (or a few) instead of one per rank and step, '
       || 'and keep files open across steps' AS recommendation,
'/* one shared file opened once, each rank at its own offset, instead of a file per rank per step */
MPI_File_open(comm, "out.dat", MPI_MODE_CREATE | MPI_MODE_WRONLY, info, &fh);
MPI_File_write_at_all(fh, (MPI_Offset)rank * block, buf, block, MPI_BYTE, MPI_STATUS_IGNORE);' AS example,
       {'records': count(*), 'max_meta_time_s': round(max(POSIX_F_META_TIME), 3),
        'meta_time_s': round(sum(POSIX_F_META_TIME), 3)} AS numbers,
       list(DISTINCT rank) FILTER (WHERE rank >= 0) AS ranks, []::UBIGINT[] AS callids,
       list(file ORDER BY POSIX_F_META_TIME DESC) AS files, []::VARCHAR[] AS servers
FROM slow
HAVING count(*) > 0
