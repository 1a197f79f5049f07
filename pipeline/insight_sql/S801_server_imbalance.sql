-- family: server
-- title: I/O servers loaded unevenly (bytes, disk operations, busy time) and the file layouts behind it
-- thresholds: server_imbalance
-- columns: server_ops.server, server_ops.size, server_ops.t_start, server_ops.t_end, server_ops.handle, arrows.file, calls.hints
-- Over the I/O servers (those without data count, with zeros): each one's disk bytes, disk operations and
-- busy time (server_busy: the union of its disk operations' intervals); imbalance = (max - min) / max.
-- High when the bytes' imbalance is above server_imbalance, warning when only the operations' is; info
-- when only the busy time's is (on the same work a busy time varies from run to run by more than that:
-- a few operations stalled by the scheduler), ok when none is.  Why: the files whose data landed on
-- fewer I/O servers than exist (a striping_factor hint below the server count, a file smaller than
-- one stripe, else its accesses); none: the access pattern.
WITH busy AS (
    SELECT server, busy_ns FROM server_busy
), load AS (
    SELECT server, count(*) AS ops, sum(size)::BIGINT AS bytes FROM disk_data GROUP BY server
), per_server AS (
    SELECT s.server, coalesce(l.ops, 0) AS ops, coalesce(l.bytes, 0) AS bytes, coalesce(b.busy_ns, 0) AS busy_ns
    FROM io_servers s LEFT JOIN load l USING (server) LEFT JOIN busy b USING (server)
), m AS (
    SELECT count(*) AS n,
           max(bytes) AS max_b, min(bytes) AS min_b, max(ops) AS max_o, min(ops) AS min_o,
           max(busy_ns) AS max_t, min(busy_ns) AS min_t,
           list(server ORDER BY bytes DESC, ops DESC, busy_ns DESC, server)[1] AS busiest,
           list(server ORDER BY bytes, ops, busy_ns, server)[1] AS idlest,
           list(server ORDER BY bytes DESC, ops DESC, busy_ns DESC, server) AS servers
    FROM per_server
), imb AS (
    SELECT *, (max_b - min_b) / max_b AS b_imb, (max_o - min_o) / max_o AS o_imb,
           coalesce((max_t - min_t) / nullif(max_t, 0), 0) AS t_imb
    FROM m WHERE max_b > 0 AND n > 1
), handles AS (  -- the file of each datafile, from the calls whose disk operations it holds
    SELECT handle, any_value(file) AS file FROM arrows
    WHERE op IN ('trove_read', 'trove_write') AND file IS NOT NULL GROUP BY handle
), files AS (
    SELECT h.file, count(DISTINCT d.server) AS used, sum(d.size)::BIGINT AS bytes, max(d.file_end) AS extent,
           any_value(o.factor) AS factor, any_value(o.strip_size) AS strip
    FROM disk_data d JOIN handles h USING (handle) LEFT JOIN file_layout o USING (file)
    GROUP BY h.file
), narrow AS (
    SELECT f.*, i.n,
           CASE WHEN f.factor < i.n THEN 'factor'
                WHEN f.extent <= f.strip * i.n THEN 'small'
                ELSE 'access' END AS why
    FROM files f, imb i WHERE f.used < i.n
), worst AS (
    SELECT count(*) AS narrow_files, list(file ORDER BY bytes DESC, file) AS files,
           list({'file': file, 'used': used, 'n': n, 'extent': extent, 'strip': strip, 'factor': factor,
                 'why': why} ORDER BY bytes DESC, file)[1] AS w
    FROM narrow
), graded AS (
    SELECT imb.*, worst.*,
           CASE WHEN b_imb > getvariable('server_imbalance') THEN 'high'
                WHEN o_imb > getvariable('server_imbalance') THEN 'warning'
                WHEN t_imb > getvariable('server_imbalance') THEN 'info'
                ELSE 'ok' END AS severity
    FROM imb, worst
), busiest AS (
    SELECT p.server, p.bytes, p.ops, p.busy_ns FROM graded g JOIN per_server p ON p.server = g.busiest
), idlest AS (
    SELECT p.server, p.bytes, p.ops, p.busy_ns FROM graded g JOIN per_server p ON p.server = g.idlest
)
SELECT g.severity,
       CASE g.severity
           WHEN 'ok' THEN printf('the %d I/O servers are balanced: %s to %s, %d to %d disk ops, busy %s to %s '
                                 || '(imbalance bytes %s, ops %s, busy %s)', g.n, format_bytes(g.min_b),
                                 format_bytes(g.max_b), g.min_o, g.max_o, fmt_ns(g.min_t), fmt_ns(g.max_t),
                                 fmt_pct(g.b_imb), fmt_pct(g.o_imb), fmt_pct(g.t_imb))
           WHEN 'info' THEN printf('the %d I/O servers moved balanced work (%s to %s, %d to %d disk ops) but were '
                                   || 'busy %s to %s (busy imbalance %s): timing, which varies from run to run; a '
                                   || 'server slower on every run is slow', g.n, format_bytes(g.min_b),
                                   format_bytes(g.max_b), g.min_o, g.max_o, fmt_ns(g.min_t), fmt_ns(g.max_t),
                                   fmt_pct(g.t_imb))
           ELSE printf('busiest I/O server %s: %s in %d disk ops, busy %s; idlest %s: %s in %d disk ops, busy %s '
                       || '(imbalance over %d I/O servers: bytes %s, ops %s, busy %s); ', b.server,
                       format_bytes(b.bytes), b.ops, fmt_ns(b.busy_ns), i.server, format_bytes(i.bytes), i.ops,
                       fmt_ns(i.busy_ns), g.n, fmt_pct(g.b_imb), fmt_pct(g.o_imb), fmt_pct(g.t_imb))
                || CASE g.w.why
                       WHEN 'factor' THEN printf('file %s striped over %d of %d I/O servers (striping_factor=%d)',
                                                 g.w.file, g.w.used, g.n, g.w.factor)
                       WHEN 'small' THEN printf('file %s (%s) smaller than one stripe (%s x %d I/O servers): on %d '
                                                || 'of them', g.w.file, format_bytes(g.w.extent),
                                                format_bytes(g.w.strip), g.n, g.w.used)
                       WHEN 'access' THEN printf('the accesses to file %s reached %d of %d I/O servers', g.w.file,
                                                 g.w.used, g.n)
                       ELSE 'every file reached every I/O server: the access pattern put more on ' || b.server END
                || CASE WHEN g.narrow_files > 1
                        THEN printf(', and %d more files on fewer I/O servers', g.narrow_files - 1) ELSE '' END
       END AS detail,
       CASE WHEN g.severity IN ('ok', 'info') THEN NULL
            WHEN g.w.why = 'factor' THEN printf('open %s with striping_factor=%d (the number of I/O servers) or '
                                                || 'without the hint (default: all)', g.w.file, g.n)
            WHEN g.w.why = 'small' AND g.w.extent // g.n < getvariable('min_strip_size')
                 THEN printf('leave the striping as it is: files of %s are too small to spread over %d I/O servers (a strip is at '
                             || 'least %s)', format_bytes(g.w.extent), g.n,
                             format_bytes(getvariable('min_strip_size')::BIGINT))
            WHEN g.w.why = 'small' THEN printf('a smaller striping_unit, so that files of %s spread over all %d '
                                               || 'I/O servers: the hint, or callid run --strip-size %s',
                                               format_bytes(g.w.extent), g.n,
                                               size_arg(strip_advice(g.w.extent // g.n)))
            ELSE 'spread the accesses over the strips of every I/O server: offsets and access sizes in whole '
                 || 'stripes (striping_unit x striping_factor), or a striping_unit the accesses divide evenly' END
           AS recommendation,
       {'io_servers': g.n, 'max_bytes': g.max_b, 'min_bytes': g.min_b, 'bytes_imbalance_share': round(g.b_imb, 4),
        'max_ops': g.max_o, 'min_ops': g.min_o, 'ops_imbalance_share': round(g.o_imb, 4),
        'max_busy_ns': g.max_t, 'min_busy_ns': g.min_t, 'busy_imbalance_share': round(g.t_imb, 4),
        'narrow_files': g.narrow_files,
        'advised_strip_bytes': CASE WHEN g.severity IN ('high', 'warning') AND g.w.why = 'small'
                                         AND g.w.extent // g.n >= getvariable('min_strip_size')
                                    THEN strip_advice(g.w.extent // g.n) END} AS numbers,
       []::INTEGER[] AS ranks, []::UBIGINT[] AS callids,
       CASE WHEN g.severity IN ('high', 'warning') THEN coalesce(g.files, []) ELSE []::VARCHAR[] END AS files,
       g.servers AS servers
FROM graded g JOIN busiest b ON true JOIN idlest i ON true
