-- family: client
-- title: only blocking MPI-IO calls (no non-blocking reads or writes)
-- thresholds: -
-- drishti: M06, M07
-- columns: mpiio.MPIIO_NB_READS, MPIIO_NB_WRITES, MPIIO_*_READS, MPIIO_*_WRITES
-- Drishti's M06/M07, when the log has MPI-IO: no non-blocking read (write) call.  A warning when the
-- program made blocking calls of that direction (it could overlap them with computation); Drishti warns
-- also when it made none at all, which here is an info finding (nothing to overlap).
WITH t AS (
    SELECT d.direction, d.k,
           sum(CASE d.k WHEN 0 THEN MPIIO_NB_READS ELSE MPIIO_NB_WRITES END) AS nb,
           sum(CASE d.k WHEN 0 THEN MPIIO_INDEP_READS + MPIIO_COLL_READS + MPIIO_SPLIT_READS
                    ELSE MPIIO_INDEP_WRITES + MPIIO_COLL_WRITES + MPIIO_SPLIT_WRITES END) AS blocking
    FROM mpiio, directions d GROUP BY ALL
), hdf5 AS (
    SELECT has_module('H5F') OR EXISTS (SELECT 1 FROM mpiio WHERE file LIKE '%.h5' OR file LIKE '%.hdf5') AS yes
)
SELECT CASE WHEN blocking > 0 THEN 'warning' ELSE 'info' END AS severity,
       CASE k WHEN 0 THEN 'M06' ELSE 'M07' END AS drishti,
       CASE WHEN blocking > 0 THEN printf('%d blocking MPI-IO %s calls, no non-blocking one: the ranks wait for '
                                          'each', blocking, direction)
            ELSE printf('no MPI-IO %s at all (Drishti''s %s warns of blocking %ss anyway)', direction,
                        CASE k WHEN 0 THEN 'M06' ELSE 'M07' END, direction) END AS detail,
       CASE WHEN blocking > 0 THEN 'overlap the ' || direction || 's with computation: MPI_File_i' || direction
                                   || CASE WHEN hdf5.yes THEN ', or HDF5''s asynchronous VOL connector' ELSE '' END END
           AS recommendation,
       CASE WHEN blocking > 0 THEN
            CASE WHEN hdf5.yes THEN printf('/* HDF5 with the async VOL connector (github.com/hpc-io/vol-async) */
hid_t es = H5EScreate();
H5D%s_async(dset, H5T_NATIVE_DOUBLE, mspace, fspace, H5P_DEFAULT, buf, es);
/* ... compute ... */
H5ESwait(es, H5ES_WAIT_FOREVER, &n_running, &failed);', CASE k WHEN 0 THEN 'read' ELSE 'write' END)
            ELSE printf('MPI_Request req;
MPI_File_i%s_at(fh, offset, buf, count, MPI_BYTE, &req);
/* ... compute while the %s proceeds ... */
MPI_Wait(&req, MPI_STATUS_IGNORE);', direction, direction) END END AS example,
       {'direction': direction, 'blocking': blocking, 'non_blocking': nb} AS numbers,
       []::BIGINT[] AS ranks, []::UBIGINT[] AS callids, []::VARCHAR[] AS files, []::VARCHAR[] AS servers
FROM t, hdf5
WHERE nb = 0
ORDER BY k
