"""One call context per file-system operation: the requests carry its CallIDs, its owners travel
as the CallID map, and every rpc is logged with its CallIDs and function."""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from callid.mpiio.call import CallContext
from callid.mpiio.record import Record
from callid.mpiio.sysint import SysInt
from server_sim import protocol as P


def test_the_context_of_a_record_is_its_callid_and_function():
    call = CallContext.of(Record(5, func="MPI_File_sync"))
    assert call == CallContext((5,), "MPI_File_sync") and call.owners == ()
    with pytest.raises(FrozenInstanceError):
        call.func = "MPI_File_close"


def _trove_callids(trace_dir: str, handles: set[int]) -> dict[int, list[tuple[int, ...]]]:
    """Per datafile handle: the CallIDs of each of its Trove writes, sorted."""
    out: dict[int, list[tuple[int, ...]]] = {}
    for part in Path(trace_dir).glob("server-*.parquet"):
        for r in pq.read_table(part).to_pylist():
            if r["layer"] == "trove" and r["op"] == "trove_write" and r["handle"] in handles:
                out.setdefault(r["handle"], []).append(tuple(sorted(r["callids"])))
    return {h: sorted(ids) for h, ids in out.items()}


def test_owners_travel_as_the_callid_map_and_each_rpc_is_logged_for_its_context(fs):
    rpcs = []
    client = SysInt(fs.config, 3, lambda callids, func, _server, op, *_: rpcs.append((callids, func, op)))
    a, b, c = (3 << 41) | 1, (3 << 41) | 2, (3 << 41) | 3
    try:
        f = client.create("/pvfs2/owned", CallContext((a,), "MPI_File_open"), dfile_count=2, strip_size=4096)
        # datafile 0 holds the first 4096 bytes (a's), datafile 1 the next (b's)
        owned = CallContext((a, b), "MPI_File_write_all", ((0, 4096, 0), (4096, 4096, 1)))
        assert client.io(f, P.IoType.WRITE, [(0, 8192)], memoryview(bytes(8192)), owned) == 8192
        shared = CallContext((a, c), "MPI_File_write_at_all")  # no owners: every byte is both calls'
        assert client.io(f, P.IoType.WRITE, [(0, 8192)], memoryview(bytes(8192)), shared) == 8192
    finally:
        client.close()
    write = P.SmallIoRequest.NAME  # (one per datafile)
    assert rpcs == [((a,), "MPI_File_open", P.CreateRequest.NAME),
                    *[((a, b), "MPI_File_write_all", write)] * 2,
                    *[((a, c), "MPI_File_write_at_all", write)] * 2]
    assert _trove_callids(fs.config.trace_dir, {h for _, h in f.dfiles}) == {
        f.dfiles[0][1]: sorted([(a,), (a, c)]), f.dfiles[1][1]: sorted([(b,), (a, c)])}
