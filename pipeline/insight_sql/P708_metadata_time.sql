-- family: client
-- title: time in metadata calls (open, close, sync, set_size, set_view, ...)
-- thresholds: metadata_rank_ns
-- columns: calls.func, calls.rank, calls.dur_ns
-- Drishti's P17: high when a rank spends more than metadata_rank_ns in metadata calls (every file
-- call that moves no data); otherwise info with the share of the I/O time they take.
WITH meta AS (
    SELECT * FROM calls
    WHERE func LIKE 'MPI_File_%' AND func NOT LIKE '%read%' AND func NOT LIKE '%write%'
          AND func NOT IN ('MPI_File_get_position', 'MPI_File_get_position_shared', 'MPI_File_get_byte_offset')
), per_rank AS (
    SELECT rank, sum(dur_ns)::BIGINT AS meta_ns FROM meta GROUP BY rank
), t AS (
    SELECT (SELECT sum(meta_ns) FROM per_rank)::BIGINT AS meta_ns,
           (SELECT sum(dur_ns) FROM calls WHERE func LIKE 'MPI_File_%')::BIGINT AS io_ns,
           (SELECT count(*) FROM per_rank WHERE meta_ns > getvariable('metadata_rank_ns')) AS slow_ranks,
           (SELECT arg_max(rank, (meta_ns, -rank)) FROM per_rank) AS top_rank,
           (SELECT max(meta_ns) FROM per_rank) AS top_ns,
           (SELECT count(*) FROM meta) AS calls
)
SELECT CASE WHEN slow_ranks > 0 THEN 'high' ELSE 'info' END AS severity,
       CASE WHEN slow_ranks > 0 THEN 'P17' END AS drishti,
       printf('%d metadata calls took %s, %s of the time in MPI-IO calls; rank %d the most (%s)', calls,
              fmt_ns(meta_ns), fmt_pct(meta_ns / io_ns), top_rank, fmt_ns(top_ns))
       || CASE WHEN slow_ranks > 0 THEN printf('; %d ranks over %s', slow_ranks, fmt_ns(getvariable('metadata_rank_ns')))
               ELSE '' END AS detail,
       CASE WHEN slow_ranks > 0 THEN 'open fewer files (a shared file instead of one per process), and '
            || 'avoid repeated open/close, sync and set_size' END AS recommendation,
       {'calls': calls, 'meta_ns': meta_ns, 'io_ns': io_ns, 'meta_share': round(meta_ns / io_ns, 4),
        'slow_ranks': slow_ranks, 'top_rank': top_rank, 'top_rank_ns': top_ns} AS numbers,
       (SELECT list(rank ORDER BY meta_ns DESC, rank) FROM per_rank
        WHERE meta_ns > getvariable('metadata_rank_ns') OR rank = top_rank) AS ranks,
       []::UBIGINT[] AS callids, []::VARCHAR[] AS files, []::VARCHAR[] AS servers
FROM t WHERE calls > 0 AND io_ns > 0
