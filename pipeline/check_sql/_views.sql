-- Views several checks share, created (as temporary views) before the checks run.

-- hint_items: one row per key=value a call passed (open, set_info, set_view, delete); call_no numbers
-- the calls, so that the items of one call (a delete: of no collective coll_seq) group together.
CREATE TEMP VIEW hint_items AS
SELECT * EXCLUDE (pair, hints), split_part(pair, '=', 1) AS key,
       trim(substr(pair, strpos(pair, '=') + 1)) AS value
FROM (SELECT rank, callid, func, file, coll_seq, t_start, hints,
             row_number() OVER (ORDER BY rank, t_start, callid) AS call_no,
             unnest(string_split(hints, ';')) AS pair
      FROM calls
      WHERE func IN ('MPI_File_open', 'MPI_File_set_info', 'MPI_File_set_view', 'MPI_File_delete')
        AND hints IS NOT NULL)
WHERE pair <> '';

-- reserved_hints: the keys MPI 3.1 13.2.8 reserves; same: marked [SAME] (every rank of a collective
-- call must pass the same value)
CREATE TEMP VIEW reserved_hints AS
SELECT * FROM (VALUES ('access_style', false), ('collective_buffering', true), ('cb_block_size', true),
                      ('cb_buffer_size', true), ('cb_nodes', true), ('chunked', true), ('chunked_item', true),
                      ('chunked_size', true), ('filename', false), ('file_perm', true),
                      ('io_node_list', true), ('nb_proc', true), ('num_io_nodes', true),
                      ('striping_factor', true), ('striping_unit', true)) t(key, same);

-- pending: what a rank leaves outstanding on a handle, and when it completed (t_done; NULL: never):
-- a non-blocking call (its rid) until its `waits` row, a successful split collective _begin until the
-- next _end on the handle (begin and end pair up in order: the real MPI-IO's split calls carry no rid)
CREATE TEMP VIEW pending AS
SELECT n.rank, n.fid, n.callid, n.func, n.t_start, 'not waited for' AS why,
       (SELECT min(w.t_start) FROM waits w WHERE w.rank = n.rank AND w.rid = n.rid) AS t_done
FROM calls n WHERE starts_with(n.func, 'MPI_File_i') AND n.rid IS NOT NULL
UNION ALL
SELECT b.rank, b.fid, b.callid, b.func, b.t_start, 'not ended',
       (SELECT min(e.t_start) FROM calls e WHERE e.rank = b.rank AND e.fid = b.fid
          AND ends_with(e.func, '_end') AND e.t_start > b.t_start)
FROM calls b WHERE ends_with(b.func, '_begin') AND b.error IS NULL;
