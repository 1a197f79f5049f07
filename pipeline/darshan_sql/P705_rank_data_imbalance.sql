-- family: client
-- title: ranks moving very different amounts of data to a shared file
-- thresholds: rank_imbalance
-- drishti: P18
-- columns: posix (shared records, rank -1).POSIX_SLOWEST_RANK_BYTES, POSIX_FASTEST_RANK_BYTES, POSIX_BYTES_*
-- Drishti's P18 per shared file (Darshan's record over all ranks): the bytes of the slowest rank against
-- those of the fastest; high when they differ by more than rank_imbalance of the file's bytes.
WITH f AS (
    SELECT file, POSIX_SLOWEST_RANK AS slowest, POSIX_FASTEST_RANK AS fastest,
           POSIX_SLOWEST_RANK_BYTES AS slow_bytes, POSIX_FASTEST_RANK_BYTES AS fast_bytes,
           POSIX_BYTES_READ + POSIX_BYTES_WRITTEN AS bytes,
           abs(POSIX_SLOWEST_RANK_BYTES - POSIX_FASTEST_RANK_BYTES) / (POSIX_BYTES_READ + POSIX_BYTES_WRITTEN)
               AS imbalance
    FROM posix WHERE rank = -1 AND POSIX_BYTES_READ + POSIX_BYTES_WRITTEN > 0
), flagged AS (SELECT * FROM f WHERE imbalance > getvariable('rank_imbalance'))
SELECT 'high' AS severity, 'P18' AS drishti,
       printf('data imbalance on %d shared file(s): up to %s of a file''s bytes between its slowest and '
              'fastest rank (%s against %s on %s)', count(*), fmt_pct(max(imbalance)),
              format_bytes(arg_max(slow_bytes, imbalance)::BIGINT), format_bytes(arg_max(fast_bytes, imbalance)::BIGINT),
              arg_max(file, imbalance)) AS detail,
       'give the ranks equal shares of the shared files (the slowest rank moves more: rebalance the '
       || 'decomposition), or let collective calls spread the bytes over the aggregators' AS recommendation,
'/* equal blocks per rank: the last rank takes the remainder, no more */
MPI_Offset share = total / nprocs, mine = (rank == nprocs - 1) ? total - share * rank : share;
MPI_File_write_at_all(fh, share * rank, buf, mine, MPI_BYTE, MPI_STATUS_IGNORE);' AS example,
       {'files': count(*), 'max_imbalance_share': round(max(imbalance), 4)} AS numbers,
       list(DISTINCT slowest) AS ranks, []::UBIGINT[] AS callids,
       list(file ORDER BY imbalance DESC, file) AS files, []::VARCHAR[] AS servers
FROM flagged
HAVING count(*) > 0
