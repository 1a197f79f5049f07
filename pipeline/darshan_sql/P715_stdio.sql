-- family: client
-- title: data moved through STDIO (fread, fwrite, fprintf)
-- thresholds: stdio_share
-- drishti: S01
-- columns: stdio.STDIO_BYTES_*, posix.POSIX_BYTES_*, mpiio.MPIIO_BYTES_*
-- Drishti's S01: high when STDIO moves more than stdio_share of the job's bytes, counted as Drishti
-- counts them: STDIO's, MPI-IO's and POSIX's less MPI-IO's (the POSIX calls under MPI-IO).
WITH b AS (
    SELECT (SELECT coalesce(sum(STDIO_BYTES_READ + STDIO_BYTES_WRITTEN), 0) FROM stdio) AS s,
           (SELECT coalesce(sum(POSIX_BYTES_READ + POSIX_BYTES_WRITTEN), 0) FROM posix) AS p,
           (SELECT coalesce(sum(MPIIO_BYTES_READ + MPIIO_BYTES_WRITTEN), 0) FROM mpiio) AS m
), t AS (SELECT s, m, CASE WHEN p > 0 AND p >= m THEN p - m ELSE p END AS p FROM b)
SELECT 'high' AS severity, 'S01' AS drishti,
       printf('STDIO moves %s of the job''s data (%s of %s)', fmt_pct(s / (s + p + m)), format_bytes(s::BIGINT),
              format_bytes((s + p + m)::BIGINT)) AS detail,
       'move the bulk data to MPI-IO (or HDF5 on it); keep STDIO for small text' AS recommendation,
'/* instead of fwrite(buf, 1, n, fp) on every rank: */
MPI_File_write_at_all(fh, (MPI_Offset)rank * n, buf, n, MPI_BYTE, MPI_STATUS_IGNORE);' AS example,
       {'stdio_bytes': s, 'posix_bytes': p, 'mpiio_bytes': m, 'stdio_share': round(s / (s + p + m), 4)} AS numbers,
       []::BIGINT[] AS ranks, []::UBIGINT[] AS callids,
       (SELECT list(file ORDER BY STDIO_BYTES_READ + STDIO_BYTES_WRITTEN DESC, file) FROM stdio
        WHERE STDIO_BYTES_READ + STDIO_BYTES_WRITTEN > 0) AS files, []::VARCHAR[] AS servers
FROM t
WHERE s + p + m > 0 AND s / (s + p + m) > getvariable('stdio_share')
