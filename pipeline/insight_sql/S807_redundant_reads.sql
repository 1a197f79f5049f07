-- family: server
-- title: redundant reads: the same bytes read from disk more than once
-- thresholds: redundant_share
-- columns: server_ops.op, server_ops.handle, server_ops.disk_offset, server_ops.size, arrows.file, arrows.rank, arrows.own_bytes
-- The disk reads of read calls (not the read-back of read-modify-write: S806), per server and
-- datafile: their bytes against the union of their ranges [disk_offset, disk_offset + size) (islands
-- of overlapping ranges); redundant = read - union.  Warning when the redundant bytes are more than
-- redundant_share of the bytes read; info below.  Ranks and files: those of the reads that overlap
-- another (every rank reading the same bytes, the first reader included), and their calls.
WITH rmw AS (
    SELECT DISTINCT server, event_id FROM arrows WHERE op = 'trove_read' AND func LIKE 'MPI_File_%write%'
), reads AS (
    SELECT server, event_id, handle, disk_offset AS lo, disk_offset + size AS hi, size
    FROM disk_data d WHERE op = 'trove_read' AND size > 0 AND NOT EXISTS
        (SELECT 1 FROM rmw WHERE rmw.server = d.server AND rmw.event_id = d.event_id)
), spans AS (SELECT {'server': server, 'handle': handle} AS k, * FROM reads
), grouped AS (  -- overlapping ranges of one datafile on one server share an island
    SELECT * FROM islands('spans')
), per_island AS (
    SELECT server, handle, island, count(*) AS ops, sum(size) AS read, max(hi) - min(lo) AS once
    FROM grouped GROUP BY ALL
), shared AS (  -- the reads that overlap another, with their island's redundant bytes
    SELECT i.server, i.event_id, i.size, p.read - p.once AS redundant
    FROM grouped i JOIN per_island p USING (server, handle, island) WHERE p.ops > 1
), t AS (
    SELECT (SELECT count(*) FROM reads) AS reads, (SELECT count(*) FROM shared) AS overlapping,
           sum(read)::BIGINT AS read_bytes, sum(once)::BIGINT AS unique_bytes
    FROM per_island
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
    FROM (SELECT server, sum(read - once) AS b FROM per_island WHERE ops > 1 GROUP BY server)
)
SELECT CASE WHEN read_bytes - unique_bytes > getvariable('redundant_share') * read_bytes THEN 'warning'
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
