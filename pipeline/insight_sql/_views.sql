-- Views several insights share, created (as temporary views) before the insights run.  The runner
-- (pipeline/insights.py) has already set the thresholds and strip_size, flow_buffer and cb_buffer_size
-- as variables, and created io_servers(server), meta_servers(server) (the servers by role), data_calls
-- (the calls that move data, with their direction 'read' or 'write') and disk_data (the Trove data
-- operations, with their direction).

-- how the details print numbers: a duration chosen by magnitude, a share as a percentage
CREATE TEMP MACRO fmt_ns(ns) AS
    CASE WHEN ns IS NULL THEN '?'
         WHEN abs(ns) >= 1e9 THEN printf('%.2f s', ns / 1e9)
         WHEN abs(ns) >= 1e6 THEN printf('%.2f ms', ns / 1e6)
         WHEN abs(ns) >= 1e3 THEN printf('%.1f µs', ns / 1e3)
         ELSE printf('%d ns', ns::BIGINT) END;
CREATE TEMP MACRO fmt_pct(share) AS printf('%.1f%%', 100 * share);

-- advice callid run takes: the largest power of 2 at most x, within the bounds of a strip size or a
-- flow buffer (min_strip_size ... set by the runner from callid_core.config); a flow buffer also cuts
-- its strip into at most max_buffers_per_strip buffers
CREATE TEMP MACRO pow2_within(x, lo, hi) AS
    greatest(lo, least(hi, pow(2, floor(log2(greatest(1, x))))))::BIGINT;
CREATE TEMP MACRO strip_advice(x) AS
    pow2_within(x, getvariable('min_strip_size'), getvariable('max_strip_size'));
CREATE TEMP MACRO flow_advice(x, strip) AS
    greatest(pow2_within(x, getvariable('min_flow_buffer'), getvariable('max_flow_buffer')),
             strip // getvariable('max_buffers_per_strip'))::BIGINT;
-- a size as callid's options take it: 65536 -> 64KiB (the largest binary unit that divides it: as
-- callid_core.units.format_size; a test holds them equal)
CREATE TEMP MACRO size_arg(n) AS
    CASE WHEN n % 1073741824 = 0 THEN (n // 1073741824) || 'GiB' WHEN n % 1048576 = 0 THEN (n // 1048576) || 'MiB'
         WHEN n % 1024 = 0 THEN (n // 1024) || 'KiB' ELSE n::VARCHAR END;
-- a flow buffer that x bytes fill whole: the largest power of 2 dividing x, within the bounds (NULL: none)
CREATE TEMP MACRO flow_divisor(x, strip) AS
    CASE WHEN x > 0 AND (x & -x) >= greatest(getvariable('min_flow_buffer'), strip // getvariable('max_buffers_per_strip'))
         THEN least(x & -x, getvariable('max_flow_buffer'))::BIGINT END;

-- file_layout: each file's layout as its opens asked for it: the striping_unit and striping_factor hints of
-- its first open that gives each (NULL: not asked, or the run's MPI-IO did not pass them on to the file
-- system, striping_hints 0; factor NULL: all I/O servers); strip_size: the unit, else the run's strip_size
CREATE TEMP VIEW file_layout AS
SELECT file, coalesce(unit, getvariable('strip_size')::BIGINT) AS strip_size, unit, factor
FROM (SELECT DISTINCT file FROM calls WHERE file IS NOT NULL)
LEFT JOIN (SELECT file, arg_min(unit, t_start) FILTER (WHERE unit IS NOT NULL) AS unit,
                  arg_min(factor, t_start) FILTER (WHERE factor IS NOT NULL) AS factor
           FROM (SELECT file, t_start,
                        nullif(regexp_extract(hints, '(^|;)\s*striping_unit=([1-9]\d*)', 2), '')::BIGINT AS unit,
                        nullif(regexp_extract(hints, '(^|;)\s*striping_factor=([1-9]\d*)', 2), '')::BIGINT
                            AS factor
                 FROM calls WHERE func = 'MPI_File_open' AND getvariable('striping_hints') = 1)
           GROUP BY file) USING (file);
