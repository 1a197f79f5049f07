-- family: client
-- title: no MPI-IO: the program uses only POSIX or STDIO
-- thresholds: -
-- drishti: M01
-- columns: job.modules
-- Drishti's M01: a warning when the log has no MPI-IO module (the program never called MPI-IO, or
-- Darshan was built without it).
SELECT 'warning' AS severity, 'M01' AS drishti,
       'the log has no MPI-IO module: the program does its I/O through ' ||
       coalesce(nullif(concat_ws(' and ', CASE WHEN has_module('POSIX') THEN 'POSIX' END,
                                 CASE WHEN has_module('STDIO') THEN 'STDIO' END), ''), 'neither POSIX nor STDIO')
       || ' alone' AS detail,
       'use MPI-IO (or HDF5 or PnetCDF on it) for the shared data: collective calls, hints and aggregators '
       || 'are then available' AS recommendation,
'MPI_File fh;
MPI_File_open(MPI_COMM_WORLD, "out.dat", MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
MPI_File_write_at_all(fh, (MPI_Offset)rank * n, buf, n, MPI_BYTE, MPI_STATUS_IGNORE);
MPI_File_close(&fh);' AS example,
       {'modules': (SELECT value FROM job WHERE key = 'modules')} AS numbers,
       []::BIGINT[] AS ranks, []::UBIGINT[] AS callids, []::VARCHAR[] AS files, []::VARCHAR[] AS servers
WHERE NOT has_module('MPI-IO')
