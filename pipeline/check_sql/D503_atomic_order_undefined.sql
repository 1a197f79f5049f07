-- severity: warning
-- marmot: 5.6 Consistency
-- title: two ranks access the same bytes in atomic mode, one writing, with nothing ordering them
-- rule: MPI 3.1 13.6.1: in atomic mode conflicting accesses are sequentially consistent, each seeing all of the other or none, but which comes first is undefined unless the program orders them (a barrier of both ranks between them: a collective of a communicator of both, or on callid's simulated file system an open/sync/close of the file)
-- columns: calls.func, calls.file, calls.fid, calls.file_offset, calls.size, calls.region_offsets, calls.region_lengths, calls.t_start, calls.t_end, calls.rid, calls.error, calls.coll_seq, calls.comm_id, calls.atomicity, waits.rid, mpi_calls.func, mpi_calls.comm_id, rpcs.callid, arrows.server, arrows.op, arrows.handle, arrows.disk_offset, arrows.size, arrows.event_id
-- needs: accesses, opens, atomicity, barriers, completions

-- MARMOT's race in atomic mode: the same pairs as D502 (the same bytes, one access a write, two ranks, on
-- one open of the file, both in atomic mode), with no sync needed, only an order: unordered when no
-- barrier of both ranks lies between the first's end and the second's start.  The file's contents are
-- then one of the two outcomes, which one the run decided.  One finding per file, as D502 (the shared
-- query, conflicts(atomic_mode), is in _views.sql).
SELECT * FROM conflicts(true)
