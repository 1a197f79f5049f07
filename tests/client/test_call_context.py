"""One call context per file-system operation: the requests carry its CallIDs, whose bytes each disk
operation moves travels with them (from its owners), and every rpc is logged with its CallIDs and
function."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from callid.mpiio.call import CallContext
from callid.mpiio.record import Record
from callid.mpiio.sysint import FsError, SysInt
from server_sim import protocol as P


def test_the_context_of_a_record_is_its_callid_and_function():
    call = CallContext.of(Record(5, func="MPI_File_sync"))
    assert call == CallContext((5,), "MPI_File_sync") and call.owners == ()
    with pytest.raises(FrozenInstanceError):
        call.func = "MPI_File_close"


def _trove_rows(trace_dir: str, handles: set[int], op: str = "trove_write") -> list[dict]:
    return [r for part in Path(trace_dir).glob("server-*.parquet") for r in pq.read_table(part).to_pylist()
            if r["layer"] == "trove" and r["op"] == op and r["handle"] in handles]


def _trove_callids(trace_dir: str, handles: set[int]) -> dict[int, list[tuple[tuple[int, int], ...]]]:
    """Per datafile handle: the (CallID, bytes) of each of its Trove writes, sorted."""
    out: dict[int, list[tuple[tuple[int, int], ...]]] = {}
    for r in _trove_rows(trace_dir, handles):
        out.setdefault(r["handle"], []).append(tuple(sorted(zip(r["callids"], r["callid_bytes"]))))
    return {h: sorted(ids) for h, ids in out.items()}


def test_owners_travel_as_callid_bytes_and_each_rpc_is_logged_for_its_context(fs):
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
                    *[((a,), "MPI_File_open", P.CreateDfileRequest.NAME)] * 2,  # (the new file's datafiles)
                    *[((a, b), "MPI_File_write_all", write)] * 2,
                    *[((a, c), "MPI_File_write_at_all", write)] * 2]
    assert _trove_callids(fs.config.trace_dir, {h for _, h in f.dfiles}) == {
        f.dfiles[0][1]: sorted([((a, 4096),), ((a, 2048), (c, 2048))]),
        f.dfiles[1][1]: sorted([((b, 4096),), ((a, 2048), (c, 2048))])}


def test_ownership_too_large_for_one_request_splits_it_and_stays_exact(fs):
    rpcs = []
    client = SysInt(fs.config, 0, lambda callids, func, _server, op, *_: rpcs.append(op))
    ids = tuple(range(1, 17))  # 16 calls, each owning every 16th 4 KiB block of 16 MiB
    block, size = 4096, 16 << 20
    owners = tuple((off, block, off // block % 16) for off in range(0, size, block))
    try:
        f = client.create("/pvfs2/split", CallContext(ids[:1], "MPI_File_open"), dfile_count=4,
                          strip_size=65536)
        call = CallContext(ids, "MPI_File_write_all", owners)
        assert client.io(f, P.IoType.WRITE, [(0, size)], memoryview(bytes(size)), call) == size
    finally:
        client.close()
    # per datafile 128 flow buffers of 32 KiB, 8 calls in each: 2176 values, more than one request
    # holds (16 KiB): two requests per datafile, each with its buffers' ownership
    assert rpcs.count(P.IoRequest.NAME) == 8
    rows = _trove_rows(fs.config.trace_dir, {h for _, h in f.dfiles})
    assert len(rows) == size // fs.config.flow_buffer
    for r in rows:  # a 32 KiB buffer holds 8 blocks, of calls 1-8 or 9-16
        first = r["file_offset"] // block % 16
        assert r["callids"] == list(ids[first:first + 8]) and r["callid_bytes"] == [block] * 8
        assert r["file_end"] - r["file_offset"] == r["size"] == 32768


def test_a_client_connects_to_every_server_before_the_program_s_first_call(fs):
    """callid's own connections (TCP, the secret's handshake) are made at the rank's start-up
    (``callid.launch``), not in the traced call that first reaches a server; a server that cannot be
    reached then is left for the call that needs it, which says why."""
    rpcs = []
    client = SysInt(fs.config, 2, lambda *a: rpcs.append(a))
    try:
        client.connect()
        assert sorted(client._conns) == sorted(s.name for s in fs.config.servers) and rpcs == []
    finally:
        client.close()
    gone = replace(fs.config, servers=[*fs.config.servers, replace(fs.config.servers[0], name="io9", port=1)])
    client = SysInt(gone, 2, lambda *a: None)
    try:
        client.connect()  # (no error: io9 is for later)
        assert "io9" not in client._conns and len(client._conns) == len(fs.config.servers)
        with pytest.raises(FsError, match="cannot reach server io9"):
            client._conn("io9")
    finally:
        client.close()
