"""The replay schedule: CallIDs of the source ranks, collective calls and epochs, setup calls, filters."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from callid.replay.accesses import ACCESS
from callid.replay.plan import OPEN, PREFILL_PIECE, SETUP, make_plan, select, stored_bytes
from callid_core.errors import BadValue, InputError
from callid_core.ids import Layout
from callid_core.units import RankSet, parse_ranks, parse_window

LAYOUT = Layout(64, 23)


def accesses(rows: list[tuple]) -> pa.Table:
    """(rank, file, io, offset, length, t_start, coll) rows as an access table."""
    cols = list(zip(*rows))
    n = len(rows)
    return ACCESS.arrow(n, {
        "rank": pa.array(cols[0], pa.int32()), "file": pa.array(cols[1]), "io": pa.array(cols[2]),
        "offset": pa.array(cols[3], pa.int64()), "length": pa.array(cols[4], pa.int64()),
        "t_start": pa.array(cols[5], pa.int64()), "t_end": pa.array([t + 5 for t in cols[5]], pa.int64()),
        "coll": pa.array(cols[6], pa.int64()), "origin": pa.array(["DXT_MPIIO"] * n),
        "inferred": pa.array(["collective" if c is not None else None for c in cols[6]], pa.string())})


def rows_of(plan) -> list[dict]:
    return plan.calls.to_pylist()


def test_every_access_becomes_one_call_of_its_rank_with_unique_callids():
    acc = accesses([(r, "/f", "write", r * 100 + k * 10, 10, 1000 + 10 * k + r, None)
                    for r in range(3) for k in range(4)])
    plan = make_plan(acc, LAYOUT, "/pvfs2")
    calls = [c for c in rows_of(plan) if c["io"] != OPEN]
    assert sorted((c["rank"], c["offset"], c["length"]) for c in calls) == sorted(
        (r, r * 100 + k * 10, 10) for r in range(3) for k in range(4))
    ids = [c["callid"] for c in rows_of(plan)]
    assert len(set(ids)) == len(ids)
    for c in rows_of(plan):
        assert LAYOUT.unpack(c["callid"])[0] == c["rank"]
        assert c["path"] == "/pvfs2/f"
    # each rank's counters follow its order in the source run
    for r in range(3):
        mine = [c for c in calls if c["rank"] == r]
        counters = [LAYOUT.unpack(c["callid"])[1] for c in mine]
        assert counters == sorted(counters)
        assert [c["t_start"] for c in mine] == sorted(c["t_start"] for c in mine)
    assert {c["func"] for c in calls} == {"MPI_File_write_at"}
    assert plan.collectives == 0 and plan.ranks == 3 and plan.files == 1


def test_collective_calls_are_numbered_in_order_and_split_streams_into_epochs():
    # two ranks: independent write, collective write 0, independent read, collective read 0
    acc = accesses([
        (0, "/f", "write", 0, 8, 10, None), (1, "/f", "write", 8, 8, 11, None),
        (0, "/f", "write", 16, 8, 20, 0), (1, "/f", "write", 24, 8, 21, 0),
        (0, "/f", "read", 0, 8, 30, None), (1, "/f", "read", 8, 8, 31, None),
        (0, "/f", "read", 16, 8, 40, 0), (1, "/f", "read", 24, 8, 41, 0)])
    plan = make_plan(acc, LAYOUT, "/pvfs2", prefill=False)
    calls = [c for c in rows_of(plan) if c["epoch"] != SETUP]
    assert plan.collectives == 2
    by = {(c["rank"], c["io"], c["t_start"]): c for c in calls}
    assert by[(0, "write", 20)]["coll_seq"] == 0 and by[(1, "write", 21)]["coll_seq"] == 0
    assert by[(0, "read", 40)]["coll_seq"] == 1
    assert by[(0, "write", 20)]["func"] == "MPI_File_write_at_all"
    assert by[(1, "read", 41)]["func"] == "MPI_File_read_at_all"
    assert [by[(0, io, t)]["epoch"] for io, t in (("write", 10), ("write", 20), ("read", 30), ("read", 40))] \
        == [0, 0, 1, 1]
    assert by[(0, "read", 30)]["coll_seq"] is None


def test_collectives_in_another_order_on_one_rank_are_refused():
    acc = accesses([(0, "/a", "write", 0, 8, 10, 0), (0, "/b", "write", 0, 8, 20, 0),
                    (1, "/b", "write", 8, 8, 11, 0), (1, "/a", "write", 8, 8, 21, 0)])
    with pytest.raises(InputError, match="rank 1 makes its collective calls in another order"):
        make_plan(acc, LAYOUT, "/pvfs2")


def test_setup_opens_each_file_once_by_its_lowest_rank_and_prefills_files_read_first():
    acc = accesses([(2, "/in", "read", 0, 100, 10, None), (3, "/in", "read", PREFILL_PIECE, 50, 11, None),
                    (1, "/out", "write", 0, 10, 5, None), (1, "/out", "read", 0, 10, 20, None)])
    calls = rows_of(make_plan(acc, LAYOUT, "/mnt/"))
    setup = [c for c in calls if c["epoch"] == SETUP]
    opens = sorted((c["rank"], c["file"]) for c in setup if c["io"] == OPEN)
    assert opens == [(1, "/out"), (2, "/in")]
    fills = sorted((c["rank"], c["offset"], c["length"]) for c in setup if c["inferred"] == "prefill")
    assert fills == [(2, 0, PREFILL_PIECE), (2, PREFILL_PIECE, 50)]  # /out is written before it is read
    assert all(c["origin"] == "replay" and c["func"] in ("MPI_File_open", "MPI_File_write_at") for c in setup)
    # the open is the opener's first call, before its prefill writes
    first = min((c for c in calls if c["rank"] == 2), key=lambda c: LAYOUT.unpack(c["callid"])[1])
    assert first["io"] == OPEN
    assert [c["path"] for c in setup if c["io"] == OPEN][0].startswith("/mnt/")


def test_filters_by_rank_file_and_window():
    acc = accesses([(r, f, "write", 0, 8, t, None) for r in range(4) for f in ("/a.h5", "/b.dat")
                    for t in (1_000_000_000, 3_000_000_000)])
    assert select(acc, ranks=RankSet.of({1, 2})).num_rows == 8
    assert set(select(acc, files=["*.h5"])["file"].to_pylist()) == {"/a.h5"}
    assert select(acc, window=parse_window("2s:")).num_rows == 8
    assert select(acc, ranks=RankSet.of({0}), files=["/b*"], window=parse_window(":2s")).num_rows == 1
    with pytest.raises(InputError, match="nothing to replay"):
        make_plan(select(acc, files=["*.nc"]), LAYOUT, "/pvfs2")


def test_rank_lists_and_windows_parse_or_say_what_is_wrong():
    assert parse_ranks("0-3,7") == RankSet(((0, 3), (7, 7))) == RankSet.of({0, 1, 2, 3, 7})
    huge = parse_ranks("5-2147483647,0")  # (two ranges: nothing expanded)
    assert huge.ranges == ((0, 0), (5, 2147483647)) and 2147483647 in huge and 3 not in huge
    assert parse_window(":500ms") == (0.0, 500e6)
    for bad in ("x", "3-1", "", "0-99999999999999999999"):
        with pytest.raises(BadValue, match="--ranks"):
            parse_ranks(bad)
    for bad in ("10s", "5s:1s", "2s:2s"):
        with pytest.raises(BadValue, match="--window"):
            parse_window(bad)


def test_a_rank_beyond_the_layout_is_refused():
    acc = accesses([(300, "/f", "write", 0, 8, 1, None)])
    with pytest.raises(BadValue, match="rank 300 does not fit CallID layout 32/8"):
        make_plan(acc, Layout(32, 8), "/pvfs2")


def test_large_plans_are_columnar():
    n = 200_000
    rng = np.random.default_rng(1)
    acc = accesses(list(zip(rng.integers(0, 4096, n).tolist(), ["/f"] * n, ["write"] * n,
                            (np.arange(n) * 8).tolist(), [8] * n, rng.integers(0, 10**9, n).tolist(),
                            [None] * n)))
    plan = make_plan(acc, LAYOUT, "/pvfs2")
    assert plan.calls.num_rows == n + 1 and plan.ranks == len(set(acc["rank"].to_pylist()))


def test_the_bytes_a_plan_stores_count_each_written_range_once_in_whole_blocks():
    """What ``callid replay`` compares with the free space: per file, the union of the written ranges,
    prefill included, rounded out to disk blocks; reads store nothing."""
    acc = accesses([(0, "/a", "write", 0, 8192, 10, None), (1, "/a", "write", 4096, 8192, 11, None),
                    (0, "/a", "write", 100_000, 1, 12, None), (0, "/b", "write", 0, 100, 13, None),
                    (0, "/c", "read", 0, 3 * PREFILL_PIECE, 14, None)])
    plan = make_plan(acc, LAYOUT, "/pvfs2")
    assert stored_bytes(plan.calls, 4096) == 3 * 4096 + 4096 + 4096 + 3 * PREFILL_PIECE
    assert stored_bytes(make_plan(acc, LAYOUT, "/pvfs2", prefill=False).calls, 4096) == 5 * 4096
    assert stored_bytes(make_plan(acc.slice(4), LAYOUT, "/pvfs2", prefill=False).calls, 4096) == 0
