-- family: client
-- title: many small requests to shared files
-- thresholds: small_bytes, small_share, small_count
-- columns: calls.func, calls.size, calls.rank, calls.file
-- Drishti's P15/P16 on the shared files (several ranks access them, as P707): per direction, data calls
-- under small_bytes; high when they are more than small_share of the direction's calls on those files and
-- more than small_count.  The files named hold more than half of small_share of them; the ranks, those
-- that make the most small requests there.
WITH shared AS (
    SELECT file FROM data_calls GROUP BY file HAVING count(DISTINCT rank) > 1
), d AS (
    SELECT c.* FROM data_calls c SEMI JOIN shared USING (file)
), t AS (
    SELECT direction, count(*) AS total, count(*) FILTER (WHERE size < getvariable('small_bytes')) AS small
    FROM d GROUP BY direction
), f AS (
    SELECT direction, file, count(*) AS small FROM d WHERE size < getvariable('small_bytes') GROUP BY ALL
), r AS (
    SELECT direction, list(rank ORDER BY n DESC, rank) AS ranks
    FROM (SELECT direction, rank, count(*) AS n FROM d WHERE size < getvariable('small_bytes') GROUP BY ALL)
    GROUP BY direction
)
SELECT 'high' AS severity, CASE t.direction WHEN 'read' THEN 'P15' ELSE 'P16' END AS drishti,
       printf('%d small %s requests (under %s) to shared files: %s of their %d %ss', t.small, t.direction,
              format_bytes(getvariable('small_bytes')::BIGINT), fmt_pct(t.small / t.total), t.total,
              t.direction) AS detail,
       'use collective calls on the shared files (the aggregators turn many small requests into few large '
       || 'ones; cb_buffer_size, cb_nodes), or have each rank ' || t.direction || ' one large block'
           AS recommendation,
       printf('/* collective buffering on: many ranks'' small %ss become large ones */
MPI_Info_set(info, "romio_cb_%s", "enable");
MPI_File_open(comm, path, amode, info, &fh);
MPI_File_%s_at_all(fh, offset, buf, count, MPI_BYTE, MPI_STATUS_IGNORE);', t.direction, t.direction, t.direction)
           AS example,
       {'direction': t.direction, 'requests': t.total, 'small': t.small,
        'small_share': round(t.small / t.total, 4)} AS numbers,
       coalesce(r.ranks, []) AS ranks, []::UBIGINT[] AS callids,
       (SELECT list(f.file ORDER BY f.small DESC, f.file) FROM f
        WHERE f.direction = t.direction AND f.small > t.total * getvariable('small_share') / 2) AS files,
       []::VARCHAR[] AS servers
FROM t LEFT JOIN r USING (direction)
WHERE t.small > getvariable('small_share') * t.total AND t.small > getvariable('small_count')
ORDER BY t.direction
