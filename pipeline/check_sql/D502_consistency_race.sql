-- severity: error
-- marmot: 5.6 Consistency
-- title: two ranks access the same bytes, one writing, with neither atomic mode nor sync-barrier-sync between
-- rule: MPI 3.1 13.6.1: conflicting accesses of two ranks need atomic mode (one open) or sync/close, barrier, sync/open between them (barrier: a collective of a communicator of both ranks, or on callid's simulated file system, where they synchronise, an open/sync/close of the file; a read followed by another's write needs the barrier only)
-- columns: calls.func, calls.file, calls.fid, calls.file_offset, calls.size, calls.region_offsets, calls.region_lengths, calls.t_start, calls.t_end, calls.rid, calls.error, calls.coll_seq, calls.comm_id, calls.atomicity, waits.rid, mpi_calls.func, mpi_calls.comm_id, rpcs.callid, arrows.server, arrows.op, arrows.handle, arrows.disk_offset, arrows.size, arrows.event_id
-- needs: accesses, opens, closes, syncs, atomicity, barriers, completions

-- Accepted as the barrier: any collective call (mpi_calls) of a communicator of both ranks.  A rooted
-- one (MPI_Bcast, MPI_Gather, MPI_Reduce, ...) orders only from or towards its root, which the log does
-- not name, so it is given the benefit of the doubt (a check must stay quiet on correct programs).
-- MPI_File_sync is not temporally synchronising in general (13.6.10), but on callid's simulated file
-- system MPI_File_open, _sync and _close end in a barrier of the file's group, so there a single sync
-- (or close, then open) suffices, as the standard allows for such implementations.  Pairs of accesses
-- are not enumerated (a synthetic trace has billions), nor pairs of ranks shown one by one (1000 ranks
-- writing one file: 499,500 pairs): one finding per file, saying how many pairs of ranks race on it
-- (counted exactly) and which ranks, the first pair (by racing byte) in words, with the racing calls and
-- their disk operations, and the next two.
SELECT * FROM conflicts(false)
