-- family: client
-- title: requests not aligned in memory or in the file
-- thresholds: misaligned_share
-- drishti: P07, P08
-- columns: posix.POSIX_MEM_NOT_ALIGNED, POSIX_FILE_NOT_ALIGNED, POSIX_FILE_ALIGNMENT, POSIX_READS, POSIX_WRITES
-- Drishti's P07 (memory) and P08 (file), over every POSIX record: high when the misaligned requests are
-- more than misaligned_share of all reads and writes.  The file alignment is the one Darshan took from
-- the file system (POSIX_FILE_ALIGNMENT: the stripe size on Lustre, the block size elsewhere).
WITH t AS (
    SELECT 'memory' AS what, 'P07' AS drishti, sum(POSIX_MEM_NOT_ALIGNED) AS bad,
           max(POSIX_MEM_ALIGNMENT) AS alignment FROM posix
    UNION ALL
    SELECT 'file', 'P08', sum(POSIX_FILE_NOT_ALIGNED), max(POSIX_FILE_ALIGNMENT) FROM posix
), ops AS (SELECT sum(POSIX_READS + POSIX_WRITES) AS n FROM posix
), f AS (
    SELECT file, sum(POSIX_MEM_NOT_ALIGNED) AS in_memory, sum(POSIX_FILE_NOT_ALIGNED) AS in_file
    FROM posix GROUP BY file
)
SELECT 'high' AS severity, t.drishti,
       printf('%d of %d requests (%s) are not aligned in %s (to %s)', t.bad, ops.n, fmt_pct(t.bad / ops.n),
              t.what, format_bytes(t.alignment::BIGINT)) AS detail,
       CASE t.what WHEN 'memory' THEN 'allocate the I/O buffers aligned (posix_memalign to the page size)'
            ELSE 'make requests start and end on the file system''s alignment: set the stripe size to the '
                 || 'record size (striping_unit hint, lfs setstripe -S) or pad the records' END AS recommendation,
       CASE t.what WHEN 'memory' THEN
'void *buf;
posix_memalign(&buf, 4096, nbytes);   /* instead of malloc(nbytes) */'
       ELSE
'MPI_Info_set(info, "striping_unit", "1048576");   /* the record size, e.g. 1 MiB */
MPI_File_open(comm, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, info, &fh);
/* or on Lustre, before the file is created: lfs setstripe -S 1M dir/ */' END AS example,
       {'misaligned_in': t.what, 'requests': ops.n, 'misaligned': t.bad, 'misaligned_share': round(t.bad / ops.n, 4),
        'alignment_bytes': t.alignment} AS numbers,
       []::BIGINT[] AS ranks, []::UBIGINT[] AS callids,
       (SELECT list(file ORDER BY CASE t.what WHEN 'memory' THEN in_memory ELSE in_file END DESC, file) FROM f
        WHERE CASE t.what WHEN 'memory' THEN in_memory ELSE in_file END > 0) AS files,
       []::VARCHAR[] AS servers
FROM t, ops
WHERE ops.n > 0 AND t.bad / ops.n > getvariable('misaligned_share')
ORDER BY t.drishti
