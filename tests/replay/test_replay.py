"""``callid replay`` of the Darshan logs the darshan wheel ships: every DXT segment one call, real
servers, real bytes; a log without DXT refused."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import darshan
import duckdb
import pyarrow.parquet as pq
import pytest

from tests.conftest import callid_cmd, cli

LOGS = Path(darshan.__file__).parent
SIMPLE = LOGS / "tests" / "input" / "sample-dxt-simple.darshan"
DXT = LOGS / "examples" / "example_logs" / "dxt.darshan"
NO_DXT = LOGS / "examples" / "example_logs" / "example.darshan"


def segments(path: Path, under_mpiio: bool = False) -> Counter:
    """(module, rank, file, io, offset, length) of every DXT segment the replay takes (``under_mpiio``:
    also the DXT_POSIX segments of files with DXT_MPIIO records), read with PyDarshan's record-by-record
    reader (not the replay's)."""
    from darshan.backend import cffi_backend as dbe

    log = dbe.log_open(str(path))
    try:
        names = dbe.log_get_name_records(log)
        recs = {}
        for mod in ("DXT_MPIIO", "DXT_POSIX"):
            recs[mod] = []
            while mod in dbe.log_get_modules(log) and (rec := dbe.log_get_dxt_record(log, mod)) is not None:
                recs[mod].append(rec)
    finally:
        dbe.log_close(log)
    mpiio_files = {r["id"] for r in recs["DXT_MPIIO"]}
    out = Counter()
    for mod, rs in recs.items():
        for r in rs:
            if mod == "DXT_POSIX" and r["id"] in mpiio_files and not under_mpiio:
                continue
            for io in ("write", "read"):
                for seg in r[f"{io}_segments"]:
                    out[(mod, r["rank"], names[r["id"]], io, seg["offset"], seg["length"])] += 1
    return out


def replay_and_merge(log: Path, out: Path, *args: str) -> duckdb.DuckDBPyConnection:
    res = callid_cmd("replay", log, "-d", out, *args)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    res = cli("merge", out / "client.parquet", out / "server.parquet", "-o", out / "m.duckdb")
    assert res.returncode == 0, res.stderr
    return duckdb.connect(str(out / "m.duckdb"), read_only=True)


def check_one_call_per_segment(con: duckdb.DuckDBPyConnection, log: Path, mount: str = "/pvfs2") -> None:
    expected = segments(log)
    rows = con.execute("""
        SELECT origin, rank, file, CASE WHEN func LIKE '%write%' THEN 'write' ELSE 'read' END,
               file_offset, size FROM calls WHERE origin LIKE 'DXT%'""").fetchall()
    got = Counter((o, r, f.removeprefix(mount), io, off, n) for o, r, f, io, off, n in rows)
    assert got == expected
    # every call that moved bytes has arrows to disk operations, and only calls of its rank's CallIDs
    assert con.execute("""
        SELECT count(*) FROM calls c WHERE c.bytes > 0 AND c.callid NOT IN (SELECT callid FROM arrows)
    """).fetchall()[0][0] == 0
    assert con.execute("SELECT count(*) FROM calls WHERE error IS NOT NULL").fetchall()[0][0] == 0
    source = dict(con.execute("SELECT key, value FROM run").fetchall())["client.source"]
    assert source.startswith(f"darshan {log}")


@pytest.mark.slow
@pytest.mark.mpi
def test_replay_of_a_dxt_mpiio_log(tmp_path):
    con = replay_and_merge(SIMPLE, tmp_path / "r")
    check_one_call_per_segment(con, SIMPLE)
    # the application's MPI-IO write of 4000 bytes reached the servers' disks
    disk = con.execute("""
        SELECT sum(a.share_bytes) FROM arrows a JOIN calls c USING (callid)
        WHERE c.origin = 'DXT_MPIIO' AND a.op = 'trove_write'""").fetchall()[0][0]
    assert disk == 4000
    # the cross-layer arrow: rank 0's POSIX write under that call, all of its bytes
    assert con.execute("""SELECT c.func, s.rank, s.size, s.bytes, s.exact FROM source_io s JOIN calls c
                          USING (callid)""").fetchall() == [("MPI_File_write_at", 0, 4000, 4000, True)]
    # the job comes along: what the log says of it, in the run table (its totals as PyDarshan sums them)
    job = dict(con.execute("SELECT substr(key, 12), value FROM run WHERE key LIKE 'client.job.%'").fetchall())
    with darshan.DarshanReport(str(SIMPLE), read_all=True) as report:
        meta = report.metadata["job"]
        counters = {m: report.records[m].to_df()["counters"].sum(numeric_only=True)
                    for m in ("MPI-IO", "POSIX")}
        exe = report.metadata["exe"]
    assert {k: job[k] for k in ("jobid", "nprocs", "darshan_version", "exe", "hosts")} == {
        "jobid": str(meta["jobid"]), "nprocs": str(meta["nprocs"]),
        "darshan_version": meta["metadata"]["lib_ver"], "exe": exe.strip(), "hosts": "1"}
    assert job["modules"] == "POSIX,MPI-IO,DXT_POSIX,DXT_MPIIO"
    for layer, prefix in (("MPI-IO", "MPIIO"), ("POSIX", "POSIX")):
        assert int(job[f"{layer}.bytes_written"]) == counters[layer][f"{prefix}_BYTES_WRITTEN"]
    assert int(job["POSIX.writes"]) == counters["POSIX"]["POSIX_WRITES"]


@pytest.mark.mpi
@pytest.mark.slow
def test_replay_of_a_dxt_posix_log_with_many_files(tmp_path):
    con = replay_and_merge(DXT, tmp_path / "r", "--procs", "1", "--servers", "3")
    check_one_call_per_segment(con, DXT)
    files, opens, fills = con.execute("""
        SELECT count(DISTINCT file), count(*) FILTER (WHERE inferred = 'open'),
               count(*) FILTER (WHERE inferred = 'prefill') FROM calls""").fetchall()[0]
    assert opens == files == 169
    assert fills > 0  # the files the job only read were given their data first
    # reads found that data: they moved bytes from the disks
    assert con.execute("""
        SELECT sum(bytes) FROM calls WHERE origin = 'DXT_POSIX' AND func = 'MPI_File_read_at'
    """).fetchall()[0][0] > 0


@pytest.mark.mpi
@pytest.mark.slow
def test_a_part_of_a_log_and_a_json_summary(tmp_path):
    res = callid_cmd("replay", DXT, "-d", tmp_path / "r", "--files", "*.jar", "--window", ":2s", "--json")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert 0 < summary["calls"] < sum(segments(DXT).values())
    assert summary["processes"] == 1  # one source rank: one replayer is enough
    assert os.path.exists(summary["client"])


def test_a_log_without_dxt_is_refused_in_one_line(tmp_path):
    res = cli("replay", NO_DXT, "-d", tmp_path / "r")  # (in this process: refused before any starts)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "no DXT traces" in lines[0] and "DXT_ENABLE_IO_TRACE=1" in lines[0]
    assert not (tmp_path / "r").exists()


def _flipped(at: int) -> bytes:
    data = bytearray(SIMPLE.read_bytes())
    data[at] ^= 0xFF
    return bytes(data)


@pytest.mark.parametrize("content,message", [
    (b"", "not a Darshan log"), (b"x" * 5000, "not a Darshan log"),
    (SIMPLE.read_bytes()[:3000], "damaged or truncated"),
    # darshan-util crashed the command on these (SIGSEGV, SIGABRT): it reads in a child process
    (SIMPLE.read_bytes()[:1478], "damaged or truncated Darshan log (darshan-util crashed reading it)"),
    (_flipped(1478), "damaged or truncated Darshan log (darshan-util crashed reading it)"),
    (_flipped(300), "damaged or truncated Darshan log (darshan-util: Invalid POSIX module version")])
def test_bad_logs_get_one_line(tmp_path, content, message):
    path = tmp_path / "bad.darshan"
    path.write_bytes(content)
    res = cli("replay", path, "-d", tmp_path / "r")
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and str(path) in lines[0], res.stderr


def test_bad_options_are_usage_errors(tmp_path):
    for args, message in ((["--ranks", "7-2"], "--ranks"), (["--window", "5s"], "--window"),
                          (["--hint", "cb_nodes"], "--hint"), (["--timing", "later"], "timing")):
        res = cli("replay", SIMPLE, "-d", tmp_path / "r", *args)
        assert res.returncode == 2 and message in res.stderr, res.stderr


def synthetic(tmp_path: Path, **options) -> Path:
    """A Darshan log written by bench.darshan_log (IOR-like: every rank writes, then reads back)."""
    from bench.darshan_log import synthetic_dxt_log

    path = tmp_path / "synthetic.darshan"
    synthetic_dxt_log(path, **options)
    return path


@pytest.mark.mpi
@pytest.mark.slow
def test_collective_calls_inferred_from_the_counters_replay_two_phase(tmp_path):
    log = synthetic(tmp_path, ranks=8, accesses=3, size=64 * 1024, collective=True, ranks_per_node=4)
    con = replay_and_merge(log, tmp_path / "r", "--hint", "romio_cb_write=enable",
                           "--hint", "romio_cb_read=enable")
    check_one_call_per_segment(con, log)
    # the k-th write of every rank is one collective call: 3 writes and 3 reads, 8 ranks each
    groups = con.execute("""
        SELECT coll_seq, func, count(*), count(DISTINCT rank) FROM calls WHERE origin = 'DXT_MPIIO'
        GROUP BY ALL ORDER BY coll_seq""").fetchall()
    assert [(f, n, r) for _, f, n, r in groups] == [("MPI_File_write_at_all", 8, 8)] * 3 + [
        ("MPI_File_read_at_all", 8, 8)] * 3
    # (grouped from the counters; the aggregators and buffer size from the DXT_POSIX segments)
    assert con.execute("SELECT DISTINCT inferred FROM calls WHERE origin = 'DXT_MPIIO'").fetchall() == [
        ("collective,aggregation",)]
    # two hosts of 4 ranks (from the log's host names): two aggregators, ranks 0 and 4, moved every
    # call's bytes, each call's exactly once
    aggregators = con.execute("SELECT DISTINCT rank FROM rpcs WHERE op = 'io' ORDER BY 1").fetchall()
    assert aggregators == [(0,), (4,)]
    assert con.execute("""
        SELECT count(*) FROM calls c LEFT JOIN (SELECT callid, sum(share_bytes) AS b FROM arrows
                                                WHERE op IN ('trove_write', 'trove_read') GROUP BY 1) a
            USING (callid)
        WHERE c.origin = 'DXT_MPIIO' AND coalesce(a.b, 0) <> c.size""").fetchall()[0][0] == 0
    stats = json.loads(cli("stats", tmp_path / "r" / "m.duckdb", "--json").stdout)
    assert stats["inferred_calls"] == {"aggregation": 48, "collective": 48, "open": 1}
    assert stats["replayed_calls"] == 49


def source_times(log: Path) -> Counter:
    """(rank, start, end) of every DXT_MPIIO segment (ns from the job's start), by PyDarshan."""
    with darshan.DarshanReport(str(log), read_all=True) as report:
        records = report.records["DXT_MPIIO"].to_df()
    frames = [r[f"{io}_segments"].assign(rank=r["rank"]) for r in records for io in ("write", "read")
              if len(r[f"{io}_segments"])]
    return Counter((rank, round(s * 1e9), round(e * 1e9)) for f in frames
                   for rank, s, e in zip(f["rank"], f["start_time"], f["end_time"]))


@pytest.mark.mpi
def test_asap_ranks_of_one_replayer_do_not_wait_for_each_other(tmp_path):
    """Four source ranks driven by one replayer process: each rank's calls follow each other, the
    ranks' calls run side by side (not one rank's call after another's), and every call logs its source
    times and its lag."""
    log = synthetic(tmp_path, ranks=4, accesses=3, size=1 << 20, collective=False, reads=False, gap=0.05)
    res = callid_cmd("replay", log, "-d", tmp_path / "r", "--procs", "1", "--json")
    assert res.returncode == 0, res.stderr
    rows = [r for r in pq.read_table(tmp_path / "r" / "client.parquet").to_pylist() if r["kind"] == "call"]
    calls = [r for r in rows if r["origin"] == "DXT_MPIIO"]
    assert Counter((r["rank"], r["src_t_start"], r["src_t_end"]) for r in calls) == source_times(log)
    assert all(r["lag"] >= 0 for r in calls)
    added = [r for r in rows if r["origin"] == "replay"]
    assert added and all(r["lag"] is None and r["src_t_start"] is None for r in added)
    # asap: a rank's next call is due when its previous one ended; its lag is the time between them
    for rank in range(4):
        mine = sorted((r for r in calls if r["rank"] == rank), key=lambda r: r["t_start"])
        assert [b["t_start"] - a["t_end"] - b["lag"] for a, b in zip(mine, mine[1:])] == [0, 0]
    overlapping = sum(a["rank"] != b["rank"] and a["t_start"] < b["t_end"] and b["t_start"] < a["t_end"]
                      for a in calls for b in calls)
    assert overlapping > 0


@pytest.mark.slow
@pytest.mark.mpi
def test_a_replay_that_did_not_keep_the_pace_computes_no_per_rank_time_figure(tmp_path):
    """Eight ranks through one lane: each rank's calls wait behind the others' (their lag), so the
    figures of per-rank time are not computed and each says why."""
    log = synthetic(tmp_path, ranks=8, accesses=3, size=1 << 20, collective=False, reads=False)
    con = replay_and_merge(log, tmp_path / "r", "--procs", "1", "--lanes", "1")
    lag = con.execute("""SELECT quantile_disc(lag, 0.95), quantile_disc(t_end - t_start, 0.5) FROM calls
                         WHERE lag IS NOT NULL""").fetchall()[0]
    assert lag[0] > max(1e6, 0.05 * lag[1])  # (each waited for about 7 calls of the others)
    stats = json.loads(cli("stats", tmp_path / "r" / "m.duckdb", "--json").stdout)
    assert stats["replay_lag"]["faithful"] is False and stats["replay_lag"]["p95_ns"] == lag[0]
    assert stats["rank_imbalance"]["io_time"] is None
    assert stats["rank_time_note"].startswith("not computed: the replay did not keep the ranks' pace")
    found = json.loads(cli("insights", tmp_path / "r" / "m.duckdb", "--json").stdout)["findings"]
    assert [(f["severity"], f["detail"]) for f in found if f["code"] == "P706"] == [
        ("info", stats["rank_time_note"])]
    from pipeline.merged import open_merged
    from pipeline.report import compute_report

    report = compute_report(open_merged(str(tmp_path / "r" / "m.duckdb")))
    assert report["overview"]["write_mib_per_s_by_slowest"] is None
    assert report["source"]["pace_note"] == stats["rank_time_note"]


@pytest.mark.slow
@pytest.mark.mpi
def test_the_jobs_aggregators_and_buffer_size_come_from_its_posix_layer(tmp_path):
    """A two-layer log whose job aggregated through 2 ranks (0 and 8: not ROMIO's default of one per node,
    4 nodes) in pieces of 512 KiB: the replay finds them in the DXT_POSIX segments under the collective
    calls and aggregates with exactly those ranks and that buffer size, though the ranks' ranges do not
    interleave (ROMIO's automatic mode would not aggregate them: the job did); --hint cb_nodes overrides."""
    log = synthetic(tmp_path, ranks=16, ranks_per_node=4, accesses=2, size=256 << 10, collective=True,
                    reads=False, cb_nodes=2, cb_buffer_size=512 << 10)
    con = replay_and_merge(log, tmp_path / "r")
    run = dict(con.execute("SELECT key, value FROM run").fetchall())
    [found] = json.loads(run["client.job.aggregation"])
    assert (found["io"], found["aggregators"], found["max_piece"], found["calls"]) == (
        "write", [0, 8], 512 << 10, 2)
    assert found["bytes"] == found["collective_bytes"] == 2 * 16 * (256 << 10)
    assert any("went through 2 aggregators (ranks 0, 8) in pieces of up to 524,288 bytes" in n
               for n in json.loads(run["client.source_notes"]))
    # the replay: those ranks moved every byte, in cycles of at most 512 KiB, each call marked
    io_ranks = "SELECT list(DISTINCT rank ORDER BY rank) FROM rpcs WHERE op = 'io'"
    assert con.execute(io_ranks).fetchall()[0][0] == [0, 8]
    assert con.execute("SELECT max(size) FROM phases WHERE phase = 'io'").fetchall()[0][0] == 512 << 10
    assert con.execute("SELECT DISTINCT inferred FROM calls WHERE origin = 'DXT_MPIIO'").fetchall() == [
        ("collective,aggregation",)]
    # the cross-layer arrows: every POSIX write of the job under the call whose bytes it holds, exactly
    posix = {(r, off, n) for mod, r, _, _, off, n in segments(log, True) if mod == "DXT_POSIX"}
    assert set(con.execute("SELECT DISTINCT rank, file_offset, size FROM source_io").fetchall()) == posix
    assert con.execute("SELECT list(DISTINCT rank ORDER BY rank) FROM source_io").fetchall()[0][0] == [0, 8]
    assert con.execute("""
        SELECT count(*), count(*) FILTER (WHERE s.exact), count(*) FILTER (WHERE coalesce(s.b, 0) <> c.size)
        FROM calls c LEFT JOIN (SELECT callid, sum(bytes) AS b, bool_and(exact) AS exact FROM source_io
                                GROUP BY 1) s USING (callid)
        WHERE c.origin = 'DXT_MPIIO'""").fetchall() == [(32, 32, 0)]
    # P709: 2 aggregators on 4 nodes, fewer than ROMIO's default
    found = json.loads(cli("insights", tmp_path / "r" / "m.duckdb", "--code", "P709", "--json").stdout)
    assert [(f["severity"], f["numbers"]["aggregators"], f["numbers"]["nodes"], f["ranks"])
            for f in found["findings"]] == [("warning", 2, 4, [0, 8])]
    other = replay_and_merge(log, tmp_path / "h", "--hint", "romio_cb_write=enable", "--hint", "cb_nodes=4")
    assert other.execute(io_ranks).fetchall()[0][0] == [0, 4, 8, 12]  # (one per node, ROMIO's way)


@pytest.mark.mpi
@pytest.mark.slow
def test_original_timing_keeps_each_ranks_gaps(tmp_path):
    log = synthetic(tmp_path, ranks=2, accesses=4, size=4096, collective=False, reads=False, gap=0.1)
    res = callid_cmd("replay", log, "-d", tmp_path / "r", "--timing", "original", "--time-scale", "2")
    assert res.returncode == 0, res.stderr
    rows = [r for r in pq.read_table(tmp_path / "r" / "client.parquet").to_pylist()
            if r["kind"] == "call" and r["origin"] == "DXT_MPIIO"]
    first = min(r["t_start"] - r["lag"] - 2 * r["src_t_start"] for r in rows)  # the replay's start
    for rank in (0, 1):
        mine = sorted((r for r in rows if r["rank"] == rank), key=lambda r: r["t_start"])
        gaps = [b["t_start"] - a["t_start"] for a, b in zip(mine, mine[1:])]
        assert len(gaps) == 3 and min(gaps) >= 2 * 0.05e9  # the source's gaps (0.05-0.15 s), times 2
        # each call started its lag after its source time, times 2, from the replay's start (its rank's
        # previous call ended in time: no call had to wait for its previous one)
        assert all(r["t_start"] - r["lag"] - first >= 2 * r["src_t_start"] for r in mine)


@pytest.mark.slow
@pytest.mark.mpi
def test_a_truncated_log_is_said_to_be_incomplete(tmp_path):
    """A log whose DXT_MPIIO Darshan flagged partial and holds half the operations its counters count (the
    generator's writes only, of writes and reads): the replay says so, in its summary and in the run
    metadata the merged run table shows; a complete log says nothing of the kind."""
    import numpy as np

    from bench.darshan_log import Segments, synthetic_trace, write_log

    trace = vars(synthetic_trace(ranks=4, accesses=4, size=65536))
    kept = ~trace["dxt_mpiio"].is_read
    trace["dxt_mpiio"] = Segments(**{k: getattr(trace["dxt_mpiio"], k)[kept] for k in Segments._TYPES})
    log = tmp_path / "partial.darshan"
    write_log(log, **trace, partial=["DXT_MPIIO"])
    res = callid_cmd("replay", log, "-d", tmp_path / "r", "--json")
    assert res.returncode == 0, res.stderr
    notes = [n for n in json.loads(res.stdout)["notes"] if n.startswith("incomplete log")]
    assert notes == [
        "incomplete log: Darshan flagged its DXT_MPIIO data as partial (it ran out of memory for them); the "
        "replay has only what it recorded",
        "incomplete log: DXT_MPIIO holds 0 of the 16 operations its counters count on 1 file (e.g. 0 of 16 "
        f"reads of {trace['files'][0]}); the replay has only those it holds"]
    assert int(np.sum(kept)) == 16
    merged = cli("merge", tmp_path / "r" / "client.parquet", tmp_path / "r" / "server.parquet", "-o",
                 tmp_path / "m.duckdb")
    assert merged.returncode == 0, merged.stderr
    run = dict(duckdb.connect(str(tmp_path / "m.duckdb"), read_only=True).execute(
        "SELECT key, value FROM run").fetchall())
    assert [n for n in json.loads(run["client.source_notes"]) if n.startswith("incomplete")] == notes
    # stats, insights and the report say it too, and on how much of the job's I/O they were computed
    sample = "on 0 of the 16 reads the job made (the log holds only those)"
    stats = cli("stats", tmp_path / "m.duckdb", "--json")
    assert stats.returncode == 0, stats.stderr
    stats = json.loads(stats.stdout)
    assert stats["sample"] == sample and stats["source_notes"][:2] == notes
    assert f"every figure of the replay is {sample}" in cli("stats", tmp_path / "m.duckdb").stdout
    found = json.loads(cli("insights", tmp_path / "m.duckdb", "--json").stdout)["findings"]
    client = [f for f in found if f["family"] == "client" and not f["detail"].startswith("not recorded in")]
    assert client and all(f["detail"].endswith(f"({sample})") for f in client)
    assert all(sample not in f["detail"] for f in found if f["family"] == "server")
    from pipeline.merged import open_merged
    from pipeline.report import compute_report

    source = compute_report(open_merged(str(tmp_path / "m.duckdb")))["source"]
    assert source["sample"] == sample and source["notes"][:2] == notes and source["layer"] == "MPI-IO"
    side = {r["label"]: (r["job"], r["replay"]) for r in source["side_by_side"]}
    assert side["reads"] == (16, 0) and side["writes"] == (16, 16)
    complete = callid_cmd("replay", synthetic(tmp_path, ranks=4, accesses=4, size=65536), "-d",
                          tmp_path / "c", "--json")
    assert complete.returncode == 0, complete.stderr
    assert not [n for n in json.loads(complete.stdout)["notes"] if n.startswith("incomplete")]
