"""Server-side insights S801-S805, each on a real run of its program under ``programs/`` that triggers
it (its numbers asserted exactly: bytes, disk operations, servers, ranks), and one balanced run that no
server-side insight grades high or warning."""

from __future__ import annotations

import json

import pytest

from callid_core.ids import DEFAULT_LAYOUT
from tests.conftest import EXAMPLES
from tests.insights import advised_options, insights_of, of_code

KIB, MIB = 1024, 1 << 20


def only(findings: list[dict], code: str) -> dict:
    """The single finding of ``code``."""
    found = of_code(findings, code)
    assert len(found) == 1, json.dumps(found, indent=1)
    return found[0]


@pytest.mark.mpi
@pytest.mark.slow
def test_s801_file_on_one_server(tmp_path):
    found = insights_of(tmp_path / "out", "S801_narrow_file.py", run=("--servers", "4"))
    f = only(found, "S801")
    # 4 ranks x 256 KiB: the wide file puts 256 KiB (4 ops of 64 KiB) on every server, the narrow one
    # 1 MiB (16 ops) on the server its path picks (PVFS2's start server: len(path) % servers)
    assert f["severity"] == "high", f
    n = f["numbers"]
    assert {k: v for k, v in n.items() if "busy" not in k} == {
        "io_servers": 4, "max_bytes": 1280 * KIB, "min_bytes": 256 * KIB, "bytes_imbalance_share": 0.8,
        "max_ops": 20, "min_ops": 4, "ops_imbalance_share": 0.8, "narrow_files": 1,
        "advised_strip_bytes": None}  # (the narrow file's is a striping_factor hint, not a strip)
    assert n["max_busy_ns"] >= n["min_busy_ns"] > 0
    busiest = f"io{len('/pvfs2/s801_narrow') % 4}"
    assert f["servers"][0] == busiest and sorted(f["servers"]) == ["io0", "io1", "io2", "io3"]
    assert f["files"] == ["/pvfs2/s801_narrow"]
    assert "striped over 1 of 4 I/O servers (striping_factor=1)" in f["detail"]
    assert "striping_factor=4" in f["recommendation"]


@pytest.mark.mpi
@pytest.mark.slow
def test_s802_writes_across_strips(tmp_path):
    found = insights_of(tmp_path / "out", "S802_shifted_writes.py")
    f = only(found, "S802")
    # 32 writes of 64 KiB at 4 KiB past a strip boundary: 2 strips each, 2 disk ops (60 KiB + 4 KiB on
    # the 2 servers); the 32 aligned ones 1 each
    assert f["severity"] == "high"
    assert f["numbers"] == {"direction": "write", "calls": 64, "crossing": 32, "crossing_share": 0.5,
                            "strip_bytes": 64 * KIB, "strips_touched": 64, "strips_needed": 32,
                            "extra_strips": 32, "disk_ops": 64, "aligned_calls": 32, "aligned_disk_ops": 32}
    assert f["files"] == ["/pvfs2/s802"] and f["ranks"] == [0, 1, 2, 3] and len(f["callids"]) == 10
    assert "striping_unit" in f["recommendation"]


@pytest.mark.mpi
@pytest.mark.slow
def test_s803_flows_end_in_partial_buffers(tmp_path):
    found = insights_of(tmp_path / "out", "S803_strided_view.py", run=("--strip-size", "56KiB"))
    f = only(found, "S803")
    # 4 ranks x 2 servers: 128 blocks of 3.5 KiB, 2 requests of 64 regions = 2 flows of 224 KiB, each
    # 3 full buffers and one of 32 KiB; the 448 KiB of a call on a server would take 7 disk ops, not 8
    assert f["severity"] == "warning"
    assert f["numbers"] == {"direction": "write", "flows": 16, "flows_affected": 16, "disk_ops": 64,
                            "partial_ops": 16, "partial_share": 0.25, "partial_fill_share": 0.5,
                            "fill_share": 0.875, "extra_ops": 8, "flow_buffer_bytes": 64 * KIB,
                            "common_flow_bytes": 224 * KIB, "advised_flow_buffer_bytes": 32 * KIB}
    # (each rank's calls: open 1, set_view 2, write_at 3)
    assert f["ranks"] == [0, 1, 2, 3] and f["callids"] == [DEFAULT_LAYOUT.pack(r, 3) for r in range(4)]
    assert f["files"] == ["/pvfs2/s803"] and f["servers"] == ["io0", "io1"]
    # the advice: a flow buffer the 224 KiB flows fill whole; taken, no flow ends in a partial buffer
    assert advised_options(f) == ["--flow-buffer", "32KiB"]
    again = insights_of(tmp_path / "advised", "S803_strided_view.py",
                        run=("--strip-size", "56KiB", *advised_options(f)))
    assert of_code(again, "S803") == []


@pytest.mark.mpi
@pytest.mark.slow
def test_s804_disk_ops_smaller_than_requests(tmp_path):
    found = insights_of(tmp_path / "out", "S804_large_writes.py")
    f = only(found, "S804")
    # 16 writes of 1 MiB, 512 KiB per server each, in 64 KiB flow buffers: 256 disk ops
    assert f["severity"] == "warning"
    assert f["numbers"] == {"direction": "write", "calls": 16, "mean_request_bytes": MIB,
                            "median_request_bytes": MIB, "disk_ops": 256, "mean_disk_op_bytes": 64 * KIB,
                            "median_disk_op_bytes": 64 * KIB, "size_ratio": 0.0625,
                            # 16 MiB over 2 servers: a strip of 1 MiB (the access) still spreads it
                            "advised_strip_bytes": MIB, "advised_flow_buffer_bytes": MIB}
    assert f["files"] == ["/pvfs2/s804"] and sorted(f["servers"]) == ["io0", "io1"]
    # taken, the advice leaves nothing to warn of
    assert advised_options(f) == ["--flow-buffer", "1MiB", "--strip-size", "1MiB"]
    again = insights_of(tmp_path / "advised", "S804_large_writes.py", run=advised_options(f))
    assert [g["severity"] for g in of_code(again, "S804")] == ["ok"]


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("even", [False, True], ids=["skewed", "even"])
def test_s805_aggregator_hot_spot(tmp_path, even):
    found = insights_of(tmp_path / "out", "S805_skewed_domains.py", *(["--even"] if even else []))
    small = MIB if even else 64 * KIB
    # aggregator 0: ranks 0 and 1, 2 MiB in 32 disk ops; aggregator 1: ranks 2 and 3, 2 x small
    summary = {"collectives": 1, "hot_collectives": 0 if even else 1, "coll_seq": 1, "aggregators": 2,
               "ranks_per_aggregator": 2.0, "max_ranks_per_aggregator": 2, "max_bytes": 2 * MIB,
               "min_bytes": 2 * small, "max_ops": 32, "min_ops": 2 * small // (64 * KIB),
               "imbalance_share": round(1 - small / MIB, 4)}
    rows = of_code(found, "S805")
    assert [r["severity"] for r in rows] == (["info"] if even else ["warning", "info"]), rows
    assert all(r["numbers"] == summary for r in rows)
    if not even:
        hot = rows[0]
        assert hot["ranks"] == [0, 1] and hot["files"] == ["/pvfs2/s805"]
        assert hot["callids"] == [DEFAULT_LAYOUT.pack(r, 2) for r in (0, 1)]  # the calls aggregator 0 served
        assert "cb_nodes, now 2" in hot["recommendation"]
        assert "imbalance 93.8%" in hot["detail"]


@pytest.mark.mpi
@pytest.mark.slow
def test_balanced_run_has_no_server_side_warning(tmp_path):
    found = insights_of(tmp_path / "out", "balanced.py", run=("--servers", "4"))
    server = [f for f in found if f["code"].startswith("S8")]
    assert not [f for f in server if f["severity"] in ("high", "warning")], json.dumps(server, indent=1)
    # 16 blocks x 4 ranks x 64 KiB written and read: 2 MiB and 32 disk ops per server (busy times vary:
    # at most an info)
    f = only(found, "S801")
    assert f["severity"] in ("ok", "info")
    assert (f["numbers"]["max_bytes"], f["numbers"]["min_bytes"], f["numbers"]["max_ops"],
            f["numbers"]["min_ops"]) == (2 * MIB, 2 * MIB, 32, 32)
    ratio = of_code(found, "S804")
    assert [(r["severity"], r["numbers"]["direction"], r["numbers"]["size_ratio"]) for r in ratio] == \
        [("ok", "read", 1.0), ("ok", "write", 1.0)]
    assert not of_code(found, "S802") and not of_code(found, "S803") and not of_code(found, "S805")


@pytest.mark.mpi
@pytest.mark.slow
def test_the_findings_of_one_run_advise_one_layout(tmp_path):
    """96 KiB records at multiples of 96 KiB in 64 KiB strips and 16 KiB flow buffers: P702 (misaligned)
    and S804 (disk operations smaller than the requests) advise the same strip, the record size;
    taken, neither finds anything to change."""
    args = (str(EXAMPLES / "mpi_io_test.py"), "-b", "96KiB", "-i", "4")
    found = insights_of(tmp_path / "out", *args, np=2, run=("--servers", "2", "--flow-buffer", "16KiB"))
    advised = {f["code"]: advised_options(f) for f in found if f["code"] in ("P702", "S804")
               and f["severity"] in ("high", "warning")}
    assert advised == {"P702": ["--strip-size", "96KiB"],
                       "S804": ["--flow-buffer", "96KiB", "--strip-size", "96KiB"]}
    again = insights_of(tmp_path / "advised", *args, np=2, run=("--servers", "2", *advised["S804"]))
    assert of_code(again, "P702") == [] and {f["severity"] for f in of_code(again, "S804")} == {"ok"}


@pytest.mark.mpi
@pytest.mark.slow
def test_advice_for_records_below_the_smallest_flow_buffer_is_within_the_bounds(tmp_path):
    """1 KiB records in 256-byte strips over 4 servers: S804 advises the record size as the strip, and
    a flow buffer callid run takes (at least its smallest, 4 KiB), not one as small as the strip."""
    found = insights_of(tmp_path / "out", str(EXAMPLES / "mpi_io_test.py"), "-b", "1KiB", "-i", "4", np=2,
                        run=("--servers", "4", "--strip-size", "256"))
    warned = [f for f in of_code(found, "S804") if f["severity"] == "high"]  # (256-byte disk operations)
    assert warned
    assert all(advised_options(f) == ["--flow-buffer", "4KiB", "--strip-size", "1KiB"] for f in warned)
