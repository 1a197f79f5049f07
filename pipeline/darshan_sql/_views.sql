-- Views the insights on a Darshan log share, created (as temporary views) before they run.  The runner
-- (pipeline/darshan_insights.py) has set the thresholds as variables; the log's counters are the tables
-- posix, mpiio, stdio (a row per record: a file on one rank, or on all ranks with rank -1), job (key,
-- value) and hosts (rank, host: from the DXT records, empty without DXT).

CREATE TEMP MACRO fmt_pct(share) AS printf('%.2f%%', 100 * share);
-- whether the log holds module m (Drishti decides by the modules the log lists)
CREATE TEMP MACRO has_module(m) AS
    list_contains(string_split(coalesce((SELECT value FROM job WHERE key = 'modules'), ''), ','), m);
-- each POSIX record with its requests under 1 MiB (Drishti's five smallest size bins)
CREATE TEMP VIEW posix_small AS
SELECT *,
       POSIX_SIZE_READ_0_100 + POSIX_SIZE_READ_100_1K + POSIX_SIZE_READ_1K_10K + POSIX_SIZE_READ_10K_100K
           + POSIX_SIZE_READ_100K_1M AS small_reads,
       POSIX_SIZE_WRITE_0_100 + POSIX_SIZE_WRITE_100_1K + POSIX_SIZE_WRITE_1K_10K + POSIX_SIZE_WRITE_10K_100K
           + POSIX_SIZE_WRITE_100K_1M AS small_writes
FROM posix;
-- the two directions (k: 0 read, 1 write)
CREATE TEMP TABLE directions AS
SELECT * FROM (VALUES ('read', 0), ('write', 1)) t(direction, k);
-- each POSIX record's requests and those under 1 MiB, per direction
CREATE TEMP VIEW small_requests AS
SELECT d.direction, d.k, rank, file, CASE d.k WHEN 0 THEN POSIX_READS ELSE POSIX_WRITES END AS requests,
       CASE d.k WHEN 0 THEN small_reads ELSE small_writes END AS small
FROM posix_small, directions d;
