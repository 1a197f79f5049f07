-- family: client
-- title: bytes read or written more than once (redundant traffic)
-- thresholds: -
-- drishti: P09, P10
-- columns: posix.POSIX_BYTES_READ, POSIX_BYTES_WRITTEN, POSIX_MAX_BYTE_READ, POSIX_MAX_BYTE_WRITTEN
-- Per file and direction: more bytes moved than the file's extent (its highest byte moved + 1) means at
-- least the difference was moved more than once (by one rank or several): a warning, with that lower
-- bound.  Drishti's P09/P10 test the opposite, the job's highest byte moved (of any file) beyond the bytes
-- moved in all (of every file), which holds when accesses skip parts of a file and never when a file is
-- read twice; where only Drishti's trigger holds, an info finding says so (its code, and that no byte was
-- shown to move twice).
WITH per_file AS (
    SELECT d.direction, d.k, file,
           sum(CASE d.k WHEN 0 THEN POSIX_BYTES_READ ELSE POSIX_BYTES_WRITTEN END) AS moved,
           max(CASE d.k WHEN 0 THEN POSIX_MAX_BYTE_READ ELSE POSIX_MAX_BYTE_WRITTEN END) + 1 AS extent
    FROM posix, directions d GROUP BY ALL
), redundant AS (
    SELECT direction, k, sum(moved - extent) AS extra, sum(moved) AS moved,
           list(file ORDER BY moved - extent DESC, file) AS files
    FROM per_file WHERE moved > extent AND extent > 0 GROUP BY ALL
), drishti AS (  -- Drishti's own trigger, job-wide
    SELECT direction, k, sum(moved) AS moved, max(extent) - 1 AS highest FROM per_file GROUP BY ALL
)
SELECT 'warning' AS severity, CASE r.k WHEN 0 THEN 'P09' ELSE 'P10' END AS drishti,
       printf('at least %s %s more than once: %s %s in all on %d file(s), beyond their extents',
              format_bytes(r.extra::BIGINT), CASE r.k WHEN 0 THEN 'read' ELSE 'written' END,
              format_bytes(r.moved::BIGINT), CASE r.k WHEN 0 THEN 'read' ELSE 'written' END, len(r.files))
           AS detail,
       CASE r.k WHEN 0 THEN 'read each part once and share it (one rank reads, MPI_Bcast; or a collective '
                            'read), or keep it in memory between phases'
                ELSE 'write each part once: merge the rewrites in memory, or check for ranks writing the '
                     'same bytes' END AS recommendation,
       CASE r.k WHEN 0 THEN
'/* one rank reads what every rank needs, then broadcasts it */
if (rank == 0) MPI_File_read_at(fh, 0, buf, n, MPI_BYTE, MPI_STATUS_IGNORE);
MPI_Bcast(buf, n, MPI_BYTE, 0, comm);'
       ELSE
'/* find who writes the same bytes twice: callid check names overlapping writes (D502) */
callid replay app.darshan && callid check callid-out/merged.duckdb' END AS example,
       {'direction': r.direction, 'moved_bytes': r.moved, 'at_least_redundant_bytes': r.extra} AS numbers,
       []::BIGINT[] AS ranks, []::UBIGINT[] AS callids, r.files, []::VARCHAR[] AS servers
FROM redundant r
UNION ALL
SELECT 'info', CASE d.k WHEN 0 THEN 'P09' ELSE 'P10' END,
       printf('Drishti''s %s trigger holds (the highest byte %s, %d, is beyond the %s %s in all), which '
              'means accesses skipped parts of the files, not that any byte was %s twice',
              CASE d.k WHEN 0 THEN 'P09' ELSE 'P10' END, CASE d.k WHEN 0 THEN 'read' ELSE 'written' END,
              d.highest, format_bytes(d.moved::BIGINT), CASE d.k WHEN 0 THEN 'read' ELSE 'written' END,
              CASE d.k WHEN 0 THEN 'read' ELSE 'written' END),
       NULL, NULL, {'direction': d.direction, 'moved_bytes': d.moved, 'at_least_redundant_bytes': 0},
       [], [], [], []
FROM drishti d
WHERE d.highest > d.moved AND NOT EXISTS (SELECT 1 FROM redundant r WHERE r.k = d.k)
ORDER BY 2
