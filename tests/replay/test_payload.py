"""Production-size replays: ``--payload none`` moves and stores sizes only, with every server event,
arrow and fan-out figure of a replay with data; a replay with data that would not fit the disk is
refused before it starts; a disk that fills anyway is one line, never a traceback.  The disks are real
(a small tmpfs, mounted for the test: root only, skipped elsewhere)."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from tests.conftest import callid_cmd, cli, fill

pytestmark = pytest.mark.mpi

#: the server events of a run without times and ids: each flow and Trove operation with its sizes,
#: places, attribution and the op of its parent
SERVER_EVENTS = """
    SELECT o.server, o.layer, o.op, o.callid, o.callids, o.callid_bytes, o.callid_own, o.holes, o.rank,
           o.handle, o.disk_offset, o.file_offset, o.file_end, o.size, p.op AS parent_op
    FROM server_ops o LEFT JOIN server_ops p ON p.server = o.server AND p.event_id = o.parent
    WHERE o.layer IN ('flow', 'trove')"""
ARROWS = """
    SELECT callid, rank, func, file, server, layer, op, handle, disk_offset, file_offset, file_end, size,
           share_bytes, own_bytes, holes, rmw, n_callids, exact FROM arrows"""
FANOUT = "SELECT * EXCLUDE (callid_hex) FROM fanout"
#: the figures of callid stats that are not times
STATS = ("fanout_by_func", "bytes_per_server", "fanin", "aggregators", "arrows", "inexact_arrows",
         "unattributed_server_ops")


def write_log(path: Path, kind: str) -> Path:
    """A generated Darshan log: two-phase collective writes and reads of blocks crossing strips, or
    independent small accesses (small I/O) read back."""
    from bench.darshan_log import synthetic_dxt_log

    if kind == "collective":
        synthetic_dxt_log(path, ranks=8, accesses=3, size=200 * 1024 + 17, collective=True, ranks_per_node=4)
    else:
        synthetic_dxt_log(path, ranks=4, accesses=5, size=5000, collective=False)
    return path


def replay(log: Path, out: Path, *args: str) -> dict:
    res = callid_cmd("replay", log, "-d", out, "--json", "--hint", "romio_cb_write=enable",
                     "--hint", "romio_cb_read=enable", *args)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    merged = cli("merge", out / "client.parquet", out / "server.parquet", "-o", out / "m.duckdb")
    assert merged.returncode == 0, merged.stderr
    return json.loads(res.stdout)


def rows(db: Path, sql: str) -> Counter:
    with duckdb.connect(str(db), read_only=True) as con:
        return Counter(map(repr, con.execute(sql).fetchall()))


def bstreams(out: Path) -> dict[str, tuple[int, int]]:
    """Each datafile of a run's storage: (its size, the bytes of its disk blocks)."""
    found = {}
    for path in (out / "storage").rglob("*.bstream"):
        info = path.stat()
        found[str(path.relative_to(out))] = (info.st_size, info.st_blocks * 512)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["collective", "independent"])
def test_a_replay_without_payload_has_the_events_arrows_and_figures_of_one_with(tmp_path, kind):
    log = write_log(tmp_path / f"{kind}.darshan", kind)
    full, none = tmp_path / "full", tmp_path / "none"
    assert replay(log, full)["payload"] == "full"
    assert replay(log, none, "--payload", "none")["payload"] == "none"
    for sql in (SERVER_EVENTS, ARROWS, FANOUT):
        expected = rows(full / "m.duckdb", sql)
        assert expected and rows(none / "m.duckdb", sql) == expected, sql
    stats = [json.loads(cli("stats", out / "m.duckdb", "--json").stdout) for out in (full, none)]
    for key in STATS:
        assert stats[1][key] == stats[0][key], key
    for key in ("server_imbalance", "rank_imbalance"):  # (their times differ: they measure the simulator)
        assert {k: v for k, v in stats[1][key].items() if not k.endswith("_time")} == \
               {k: v for k, v in stats[0][key].items() if not k.endswith("_time")}
    findings = [{f["code"]: f["detail"] for f in s["insight_findings"] if f["code"].startswith("S802")}
                for s in stats]  # strip crossing
    assert findings[1] == findings[0]
    # the mode is in the run's metadata, as the merged run table shows it
    with duckdb.connect(str(none / "m.duckdb"), read_only=True) as con:
        modes = con.execute("SELECT key, json_extract_string(value, '$.payload') FROM run "
                            "WHERE key IN ('client.config', 'server.config')").fetchall()
    assert sorted(modes) == [("client.config", "none"), ("server.config", "none")]
    # the same datafiles of the same sizes; without payload, not one data block
    with_data, without = bstreams(full), bstreams(none)
    assert {k: size for k, (size, _) in without.items()} == {k: size for k, (size, _) in with_data.items()}
    assert sum(used for _, used in with_data.values()) >= sum(size for size, _ in with_data.values()) > 0
    assert sum(used for _, used in without.values()) == 0


def one_line(res: subprocess.CompletedProcess) -> str:
    lines = [line for line in res.stderr.splitlines() if not line.startswith("callid replaying")]
    assert res.returncode == 1 and len(lines) == 1 and lines[0].startswith("callid: error: "), res.stderr
    return lines[0]


@pytest.mark.parametrize("tmpfs", [80 << 20], indirect=True)
def test_a_replay_whose_data_does_not_fit_the_disk_is_refused_before_it_starts(tmp_path, tmpfs):
    from bench.darshan_log import synthetic_dxt_log

    log = tmp_path / "big.darshan"  # 4 ranks writing 8 blocks of 1 MiB: 32 MiB, then reading them
    synthetic_dxt_log(log, ranks=4, accesses=8, size=1 << 20, collective=False)
    free = os.statvfs(tmpfs).f_bavail * os.statvfs(tmpfs).f_frsize
    res = cli("replay", log, "-d", tmpfs / "r")  # (in this process: no process may start)
    line = one_line(res)
    assert f"would store {32 << 20:,} bytes" in line and f"has {free:,} bytes" in line
    assert "--payload none" in line
    assert not (tmpfs / "r" / "storage").exists()  # (refused before anything started)
    res = callid_cmd("replay", log, "-d", tmpfs / "r", "--payload", "none")
    assert res.returncode == 0, res.stderr
    assert bstreams(tmpfs / "r") and sum(used for _, used in bstreams(tmpfs / "r").values()) == 0


@pytest.mark.slow
@pytest.mark.parametrize("tmpfs", [4 << 20], indirect=True)
def test_a_disk_filling_up_is_one_line(tmp_path, tmpfs):
    log = write_log(tmp_path / "c.darshan", "collective")
    fill(tmpfs, 160 << 10)  # (room for the servers to start, not for the logs)
    line = one_line(callid_cmd("replay", log, "-d", tmpfs / "r", "--payload", "none"))
    assert "No space left on device" in line and str(tmpfs / "r") in line
    replay(log, tmp_path / "r")
    res = cli("merge", tmp_path / "r" / "client.parquet", tmp_path / "r" / "server.parquet",
              "-o", tmpfs / "m.duckdb")
    assert one_line(res) == f"callid: error: {tmpfs / 'm.duckdb'}: cannot write the merged output " \
                            "(No space left on device)"
