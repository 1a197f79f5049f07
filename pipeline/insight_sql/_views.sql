-- Views several insights share, created (as temporary views) before the insights run; the runner
-- has created io_servers(server) and meta_servers(server) from the run's configuration and set the
-- variables strip_size, flow_buffer and cb_buffer_size.

-- data_calls: the calls that move data (a split collective's data is its _begin's), with their direction
CREATE TEMP VIEW data_calls AS
SELECT *, CASE WHEN func LIKE '%read%' THEN 'read' ELSE 'write' END AS direction
FROM calls
WHERE size > 0 AND (func LIKE 'MPI_File_%read%' OR func LIKE 'MPI_File_%write%') AND func NOT LIKE '%\_end' ESCAPE '\';

-- disk_data: the Trove data operations (reads and writes on the servers' disks)
CREATE TEMP VIEW disk_data AS
SELECT *, CASE op WHEN 'trove_read' THEN 'read' ELSE 'write' END AS direction
FROM server_ops
WHERE op IN ('trove_read', 'trove_write');

-- how the details print numbers: a duration chosen by magnitude, a share as a percentage
CREATE TEMP MACRO fmt_ns(ns) AS
    CASE WHEN ns IS NULL THEN '?'
         WHEN abs(ns) >= 1e9 THEN printf('%.2f s', ns / 1e9)
         WHEN abs(ns) >= 1e6 THEN printf('%.2f ms', ns / 1e6)
         WHEN abs(ns) >= 1e3 THEN printf('%.1f µs', ns / 1e3)
         ELSE printf('%d ns', ns::BIGINT) END;
CREATE TEMP MACRO fmt_pct(share) AS printf('%.1f%%', 100 * share);

-- file_strip: each file's strip size, the striping_unit hint of its first open that gives one, else the
-- run's strip_size
CREATE TEMP VIEW file_strip AS
SELECT file, coalesce(arg_min(unit, t_start) FILTER (WHERE unit IS NOT NULL),
                      getvariable('strip_size')::BIGINT) AS strip_size
FROM (SELECT file, t_start, nullif(regexp_extract(hints, '(^|;)striping_unit=(\d+)', 2), '')::BIGINT AS unit
      FROM calls WHERE func = 'MPI_File_open')
GROUP BY file;
