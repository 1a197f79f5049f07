-- severity: error
-- marmot: 5.2 File manipulation
-- title: a file deleted while some rank has it open
-- rule: MPI 3.1 13.2.3: deleting a file a process has open leaves its accesses implementation dependent
-- columns: calls.func, calls.file, calls.rank, calls.fid, calls.t_start, calls.t_end, calls.error
-- needs: deletes, opens, closes
-- A rank holds the file open from the end of its successful MPI_File_open until its MPI_File_close
-- begins (the close's start, not its end: the ranks leave a collective close at slightly different
-- times, and the usual "close, then rank 0 deletes" must stay quiet).  Names are compared as opened,
-- without a "pvfs2:" prefix.
WITH deletes AS (
    SELECT rank, callid, func, file, t_start, regexp_replace(file, '^pvfs2:', '') AS name
    FROM calls WHERE func = 'MPI_File_delete'
),
opens AS (
    SELECT o.rank, o.callid, o.func, o.t_end AS t_open, regexp_replace(o.file, '^pvfs2:', '') AS name,
           (SELECT min(c.t_start) FROM calls c
            WHERE c.func = 'MPI_File_close' AND c.rank = o.rank AND c.fid = o.fid) AS t_close
    FROM calls o WHERE o.func = 'MPI_File_open' AND o.error IS NULL
),
held AS (
    SELECT d.*, o.rank AS holder, o.callid AS open_callid, o.func AS open_func
    FROM deletes d JOIN opens o ON o.name = d.name AND o.t_open <= d.t_start
                                 AND (o.t_close IS NULL OR o.t_close > d.t_start)
)
SELECT list_sort(list_distinct([rank] || list(holder))) AS ranks,
       [callid] || list(open_callid ORDER BY holder) AS callids,
       [func] || list(open_func ORDER BY holder) AS funcs,
       any_value(file) AS file,
       'rank ' || rank || ' deleted the file while it is open on rank'
           || CASE WHEN count(DISTINCT holder) > 1 THEN 's ' ELSE ' ' END
           || array_to_string(list_sort(list_distinct(list(holder))), ',') AS detail
FROM held
GROUP BY rank, callid, func, t_start
ORDER BY t_start
