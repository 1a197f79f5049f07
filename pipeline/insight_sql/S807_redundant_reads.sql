-- family: server
-- title: redundant reads: the same bytes read from disk more than once
-- thresholds: redundant_share, redundant_high_share
-- columns: server_ops.op, server_ops.handle, server_ops.disk_offset, server_ops.size, arrows.file, arrows.rank, arrows.own_bytes
-- The disk reads of read calls (not the read-back of read-modify-write: S806), per server and
-- datafile: their bytes against the union of their ranges [disk_offset, disk_offset + size) (one
-- sweep by offset over the distinct ranges, as the macro covered); redundant = read - union.  High when
-- the redundant bytes are more than redundant_high_share of the bytes read (the disks read most bytes more
-- than once), warning when more than redundant_share; info below.  Ranks and files: those of the reads that overlap
-- another (every rank reading the same bytes, the first reader included), and their calls.
WITH rmw AS (
    SELECT DISTINCT server, event_id FROM arrows WHERE op = 'trove_read' AND func LIKE 'MPI_File_%write%'
), reads AS (
    SELECT server, event_id, handle, disk_offset AS lo, disk_offset + size AS hi, size
    FROM disk_data d WHERE op = 'trove_read' AND size > 0 AND NOT EXISTS
        (SELECT 1 FROM rmw WHERE rmw.server = d.server AND rmw.event_id = d.event_id)
), ranges AS (  -- the distinct ranges read, each with how many reads read it
    SELECT server, handle, lo, hi, count(*) AS n FROM reads GROUP BY ALL
), swept AS (  -- per server and datafile by offset: the furthest end before a range and through it, the
               -- next range's start (a range overlaps another unless it starts past the ends before it and
               -- the next starts past its own end)
    SELECT *, max(hi) OVER (PARTITION BY server, handle ORDER BY lo, hi
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before,
              max(hi) OVER (PARTITION BY server, handle ORDER BY lo, hi ROWS UNBOUNDED PRECEDING) AS reach,
              lead(lo) OVER (PARTITION BY server, handle ORDER BY lo, hi) AS next_lo
    FROM ranges
), per_range AS (  -- each range's bytes not read before it (its part of the union); its reads overlap
                   -- others when it was read more than once or overlaps another range
    SELECT server, handle, lo, hi, n, greatest(hi - greatest(lo, coalesce(before, lo)), 0) AS new_bytes,
           n > 1 OR NOT ((before IS NULL OR lo >= before) AND (next_lo IS NULL OR next_lo >= reach))
               AS overlapping
    FROM swept
), shared AS (
    SELECT r.server, r.event_id
    FROM reads r JOIN per_range p USING (server, handle, lo, hi) WHERE p.overlapping
), t AS (
    SELECT sum(n)::BIGINT AS reads, coalesce(sum(n) FILTER (WHERE overlapping), 0)::BIGINT AS overlapping,
           sum(n * (hi - lo))::BIGINT AS read_bytes, sum(new_bytes)::BIGINT AS unique_bytes
    FROM per_range
), who AS (  -- the calls of the overlapping reads: their ranks and files
    SELECT a.callid, a.rank, a.file, coalesce(a.own_bytes, a.size) AS bytes
    FROM arrows a JOIN shared s USING (server, event_id)
), top_ranks AS (
    SELECT list(rank ORDER BY b DESC, rank) AS ranks
    FROM (SELECT rank, sum(bytes) AS b FROM who GROUP BY rank)
), top_calls AS (
    SELECT list(callid ORDER BY b DESC, callid) AS callids
    FROM (SELECT callid, sum(bytes) AS b FROM who GROUP BY callid)
), top_files AS (
    SELECT list(file ORDER BY b DESC, file) AS files
    FROM (SELECT file, sum(bytes) AS b FROM who GROUP BY file)
), top_servers AS (
    SELECT list(server ORDER BY b DESC, server) AS servers
    FROM (SELECT server, sum(n * (hi - lo) - new_bytes) AS b FROM per_range GROUP BY server HAVING b > 0)
)
SELECT CASE WHEN read_bytes - unique_bytes > getvariable('redundant_high_share') * read_bytes THEN 'high'
            WHEN read_bytes - unique_bytes > getvariable('redundant_share') * read_bytes THEN 'warning'
            ELSE 'info' END AS severity,
       printf('%s of the %s read from disk (%s) were read before: %s read once, %d of %d disk reads overlap '
              || 'others', format_bytes(read_bytes - unique_bytes), format_bytes(read_bytes),
              fmt_pct((read_bytes - unique_bytes) / read_bytes), format_bytes(unique_bytes), overlapping,
              reads) AS detail,
       CASE WHEN read_bytes - unique_bytes > getvariable('redundant_share') * read_bytes
            THEN 'read the data once and share it (one rank reads, then MPI_Bcast), or read collectively '
                 || '(MPI_File_read_all): the aggregators read each byte once' END AS recommendation,
       {'reads': reads, 'overlapping_reads': overlapping, 'read_bytes': read_bytes,
        'unique_bytes': unique_bytes,
        'redundant_bytes': read_bytes - unique_bytes,
        'redundant_share': round((read_bytes - unique_bytes) / read_bytes, 4)} AS numbers,
       coalesce(r.ranks, []) AS ranks, coalesce(c.callids, []) AS callids, coalesce(f.files, []) AS files,
       coalesce(s.servers, []) AS servers
FROM t, top_ranks r, top_calls c, top_files f, top_servers s
WHERE read_bytes > unique_bytes
