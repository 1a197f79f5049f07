-- family: client
-- title: the mix of reads and writes (by requests and by bytes)
-- thresholds: rw_imbalance
-- columns: calls.func, calls.bytes
-- Drishti's P01-P04: a run is write (read) intensive when writes (reads) outnumber the other by
-- more than rw_imbalance of all, by requests and by bytes; info either way.
WITH t AS (
    SELECT count(*) FILTER (WHERE direction = 'read') AS reads, count(*) FILTER (WHERE direction = 'write') AS writes,
           coalesce(sum(bytes) FILTER (WHERE direction = 'read'), 0)::BIGINT AS read_bytes,
           coalesce(sum(bytes) FILTER (WHERE direction = 'write'), 0)::BIGINT AS write_bytes
    FROM data_calls
), m AS (
    SELECT *, CASE WHEN abs(writes - reads) > getvariable('rw_imbalance') * (reads + writes)
                   THEN CASE WHEN writes > reads THEN 'write' ELSE 'read' END END AS by_requests,
              CASE WHEN abs(write_bytes - read_bytes) > getvariable('rw_imbalance') * (read_bytes + write_bytes)
                   THEN CASE WHEN write_bytes > read_bytes THEN 'write' ELSE 'read' END END AS by_bytes
    FROM t
)
SELECT 'info' AS severity,
       nullif(concat_ws(', ', CASE by_requests WHEN 'write' THEN 'P01' WHEN 'read' THEN 'P02' END,
                        CASE by_bytes WHEN 'write' THEN 'P03' WHEN 'read' THEN 'P04' END), '') AS drishti,
       printf('%s by requests (%d writes, %d reads), %s by bytes (%s written, %s read)',
              coalesce(by_requests || ' intensive', 'balanced'), writes, reads,
              coalesce(by_bytes || ' intensive', 'balanced'), format_bytes(write_bytes), format_bytes(read_bytes))
           AS detail,
       NULL AS recommendation,
       {'writes': writes, 'reads': reads, 'write_bytes': write_bytes, 'read_bytes': read_bytes,
        'write_share': round(writes / (reads + writes), 4)} AS numbers,
       []::INTEGER[] AS ranks, []::UBIGINT[] AS callids, []::VARCHAR[] AS files, []::VARCHAR[] AS servers
FROM m WHERE reads + writes > 0
