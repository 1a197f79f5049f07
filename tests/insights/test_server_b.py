"""Server-side insights S806-S810 on real runs of ``programs/S80*.py``: each workload triggers its
insight, whose numbers are checked exactly (bytes, operations, calls, servers; times as relations)."""

from __future__ import annotations

import duckdb
import pytest

from tests.insights import insights_of, of_code

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

KIB = 1024


def _column(db, sql: str) -> list:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [r[0] for r in con.execute(sql).fetchall()]
    finally:
        con.close()


def _callids(db, where: str) -> list[int]:
    """The CallIDs of the calls ``where`` says, in order."""
    return _column(db, f"SELECT callid FROM calls WHERE {where} ORDER BY callid")


def test_read_modify_write(tmp_path):
    block, blocks, nranks = 16 * KIB, 8, 4  # (programs/S806_holes.py)
    found = insights_of(tmp_path / "rmw", "S806_holes.py", np=nranks)
    (rmw,) = of_code(found, "S806")
    # one aggregator (one host): its cycle spans the first block to the last, holes included, read
    # back whole in flow buffers of 64 KiB (strips alternate io0, io1), then written whole
    extent = (blocks - 1) * 2 * nranks * block + nranks * block
    assert rmw["severity"] == "warning"
    assert rmw["numbers"] == {"rmw_ops": extent // (64 * KIB), "read_back_bytes": extent, "calls": nranks,
                              "data_bytes": nranks * blocks * block, "rmw_written_bytes": extent,
                              "written_bytes": extent, "rmw_share": 1.0}
    assert rmw["ranks"] == [0] and rmw["files"] == ["/pvfs2/holes"] and rmw["servers"] == ["io0", "io1"]
    assert rmw["callids"] == _callids(tmp_path / "rmw" / "m.duckdb", "func = 'MPI_File_write_all'")
    assert "romio_cb_write=disable" in rmw["recommendation"]
    # the recommendation works: independent list I/O writes only the data, nothing is read back
    assert of_code(insights_of(tmp_path / "disabled", "S806_holes.py", "disable", np=nranks), "S806") == []


def test_redundant_reads(tmp_path):
    size, nranks = 1 << 20, 4  # (programs/S807_reread.py)
    found = insights_of(tmp_path / "out", "S807_reread.py", np=nranks)
    (again,) = of_code(found, "S807")
    assert again["severity"] == "high"  # (3 of the 4 reads of every byte are redundant: more than half)
    # each rank's read: 512 KiB on each of the two servers, 8 disk reads of 64 KiB each
    assert again["numbers"] == {"reads": nranks * 16, "overlapping_reads": nranks * 16,
                                "read_bytes": nranks * size, "unique_bytes": size,
                                "redundant_bytes": (nranks - 1) * size, "redundant_share": 0.75}
    assert again["ranks"] == [0, 1, 2, 3] and again["files"] == ["/pvfs2/reread"]
    assert again["servers"] == ["io0", "io1"]
    assert again["callids"] == _callids(tmp_path / "out" / "m.duckdb", "func = 'MPI_File_read_at'")
    # the same, counted from the calls (Drishti's P09, exactly): each byte read by the 4 ranks; written
    # once, by rank 0 (no P710 of writes)
    (calls,) = of_code(found, "P710")
    assert (calls["drishti"], calls["severity"], calls["files"]) == ("P09", "high", ["/pvfs2/reread"])
    assert calls["numbers"] == {"direction": "read", "moved_bytes": nranks * size, "unique_bytes": size,
                                "redundant_bytes": (nranks - 1) * size, "redundant_share": 0.75}
    assert sorted(calls["ranks"]) == [0, 1, 2, 3] and "MPI_Bcast" in calls["example"]
    # reads that overlap in part, across strip bounds: rank r reads 300,000 bytes from r * 100,000; the
    # union is bytes 0 to 600,000 (split over the two servers' strips, whatever the disk reads' bounds)
    found = insights_of(tmp_path / "shifted", "S807_reread.py", "shifted", np=nranks)
    (shifted,) = of_code(found, "S807")
    n = shifted["numbers"]
    assert (n["read_bytes"], n["unique_bytes"]) == (nranks * 300_000, 600_000), n
    # read by one rank alone: rank 0's first strip (bytes below 65,536) and rank 3's last two (from 524,288)
    assert n["reads"] - n["overlapping_reads"] == 3 and sorted(shifted["ranks"]) == [0, 1, 2, 3]
    (calls,) = of_code(found, "P710")  # (0.6 of the 1.2 MB read again: a warning)
    assert calls["severity"] == "warning"
    assert (calls["numbers"]["moved_bytes"], calls["numbers"]["unique_bytes"]) == (nranks * 300_000, 600_000)


def test_redundant_writes(tmp_path):
    """P710 on writes (Drishti's P10): a block rewritten in place by its rank, twice more (a file written
    once raises none: test_redundant_reads finds P710 on its reads alone)."""
    block, times, nranks = 64 * KIB, 3, 2  # (programs/P710_rewrite.py)
    found = insights_of(tmp_path / "out", "P710_rewrite.py", np=nranks)
    (rewrites,) = of_code(found, "P710")
    assert (rewrites["drishti"], rewrites["severity"]) == ("P10", "high")  # (2 of 3 writes of every byte)
    assert rewrites["numbers"] == {"direction": "write", "moved_bytes": times * nranks * block,
                                   "unique_bytes": nranks * block,
                                   "redundant_bytes": (times - 1) * nranks * block,
                                   "redundant_share": round((times - 1) / times, 4)}
    assert rewrites["ranks"] == [0, 1] and rewrites["files"] == ["/pvfs2/rewrite"]
    assert rewrites["callids"] == _callids(tmp_path / "out" / "m.duckdb", "func = 'MPI_File_write_at'")
    assert "write each part once" in rewrites["recommendation"]


def test_metadata_server_share(tmp_path):
    files, nranks = 10, 4  # (programs/S808_file_per_process.py)
    found = insights_of(tmp_path / "out", "S808_file_per_process.py", np=nranks)
    (meta,) = of_code(found, "S808")
    n = meta["numbers"]
    # per file: create and remove on meta0; a create_dfile, one small write and a remove_dfile on its
    # one I/O server
    assert 0 < n["mean_meta_request_ns"] < 10e6  # (well under slow_meta_ns: a warning, not a slow server)
    timed = ("meta_busy_ns", "mean_meta_request_ns")
    assert {k: v for k, v in n.items() if not k.startswith("busy") and k not in timed} == {
        "requests": 5 * files * nranks, "meta_requests": 2 * files * nranks, "lookup": 0, "getattr": 0,
        "create": files * nranks, "remove": files * nranks, "shared_fp": 0, "request_share": 0.4}
    assert 0 < n["meta_busy_ns"] < n["busy_ns"] and n["busy_share"] > 0.3  # (sqlite commits: slow)
    assert meta["severity"] == "warning"
    assert meta["servers"] == ["meta0"] and meta["ranks"] == [0, 1, 2, 3]
    assert meta["files"] == [f"/pvfs2/fpp.0.{i}" for i in range(files)]  # (2 operations each: by name)


def test_client_dominated_calls(tmp_path):
    found = insights_of(tmp_path / "out", "S809_one_aggregator.py", np=4)
    (client,) = of_code(found, "S809")
    n = client["numbers"]
    # 2 collective writes x 4 ranks; ranks 1-3 are no aggregators: no server time at all.  Rank 0's
    # exchange (its own data too) and I/O are close: its calls may or may not be client-dominated.
    assert client["severity"] == "warning"
    assert n["calls"] == 8 and n["idle_calls"] == 6 and 6 <= n["client_calls"] <= 8
    assert n["client_ns"] + n["server_ns"] == n["client_calls_ns"] <= n["data_ns"]
    assert n["client_calls_ns"] > 0.5 * n["data_ns"] and n["client_calls_share"] > 0.5
    assert {1, 2, 3} <= set(client["ranks"]) and client["files"] == ["/pvfs2/one_aggregator"]
    waiting = _callids(tmp_path / "out" / "m.duckdb", "func = 'MPI_File_write_at_all' AND rank > 0")
    assert len(waiting) == 6 and set(waiting) <= set(client["callids"])
    assert "cb_nodes" in client["recommendation"]


def test_stragglers(tmp_path):
    found = insights_of(tmp_path / "out", "S810_straggler.py", np=2)
    (slow,) = [f for f in of_code(found, "S810") if f["severity"] == "warning"]
    n = slow["numbers"]
    db = tmp_path / "out" / "m.duckdb"
    (sparse,) = _callids(db, "func = 'MPI_File_write_at' AND len(region_offsets) > 0")
    # 16 writes of 64 KiB and the sparse one: 16384 pieces of 4 bytes, 64 regions per request: 256
    # requests of one disk write each, all on io0 (the file is striped over one server)
    assert n["peers"] == 17 and n["disk_stragglers"] >= 1
    assert (n["disk_ops"], n["median_disk_ops"]) == (256, 1.0)
    assert n["call_ns"] > 2 * n["median_ns"] and n["disk_ns"] > 2 * n["median_disk_ns"]
    assert n["disk_ns"] <= n["call_ns"]  # (its disk time: the operations' union, within the call)
    assert n["disk_lost_ns"] > 0.15 * n["peers_ns"]
    assert slow["callids"][0] == sparse and slow["ranks"][0] == 1
    assert slow["files"] == ["/pvfs2/straggler"] and slow["servers"] == ["io0"]
    # the longest disk operation named is the sparse call's, on io0
    assert _column(db, f"""SELECT op || ' ' || dur_ns FROM arrows WHERE callid = {sparse} AND server = 'io0'
                           AND event_id = {n['slow_op_event_id']}""") == [f"trove_write {n['slow_op_ns']}"]
    assert f"#{n['slow_op_event_id']} on io0" in slow["detail"]
