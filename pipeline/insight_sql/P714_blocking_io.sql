-- family: client
-- title: only blocking MPI-IO calls (no non-blocking reads or writes)
-- thresholds: -
-- columns: calls.func, calls.file
-- needs: functions
-- Drishti's M06/M07 on the run's data calls: per direction, a warning when the program made data calls
-- and none was non-blocking (MPI_File_iread*, iwrite*, or a split collective's _begin): it waits for each.
WITH t AS (
    SELECT direction,
           count(*) FILTER (WHERE func LIKE 'MPI_File_i%' OR func LIKE '%\_begin' ESCAPE '\') AS nb,
           count(*) AS calls
    FROM data_calls GROUP BY direction
), f AS (SELECT direction, file, count(*) AS n FROM data_calls GROUP BY ALL)
SELECT 'warning' AS severity, CASE direction WHEN 'read' THEN 'M06' ELSE 'M07' END AS drishti,
       printf('%d blocking MPI-IO %s calls, no non-blocking one: the ranks wait for each', calls, direction)
           AS detail,
       'overlap the ' || direction || 's with computation: MPI_File_i' || direction || '_at (or _all), then '
       || 'MPI_Wait before the buffer is reused' AS recommendation,
       printf('MPI_Request req;
MPI_File_i%s_at(fh, offset, buf, count, MPI_BYTE, &req);
/* ... compute while the %s proceeds ... */
MPI_Wait(&req, MPI_STATUS_IGNORE);', direction, direction) AS example,
       {'direction': direction, 'blocking': calls, 'non_blocking': nb} AS numbers,
       []::INTEGER[] AS ranks, []::UBIGINT[] AS callids,
       (SELECT list(f.file ORDER BY f.n DESC, f.file) FROM f WHERE f.direction = t.direction) AS files,
       []::VARCHAR[] AS servers
FROM t
WHERE nb = 0
ORDER BY direction
