"""Merge throughput and peak memory: ``callid merge`` against a straightforward pandas version.

For each size, ``callid synth`` makes a trace (10 server events per call: 8 disk
operations and about 2 request events), then each implementation runs in its own
process (so peak RSS is its own): ``callid merge`` (clock alignment, tables, arrows,
fan-out, written to a DuckDB file) + ``callid stats``, and pandas making the same
arrows (the same columns, without clock alignment) and fan-out, written to Parquet;
its arrows are checked equal to callid's.  The thesis' O(n^2) arrow scan runs at 10 k and
100 k events to show its growth.  Needs pandas: ``pip install -e '.[bench]'``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pipeline.synth import SynthOptions, synthesize

CALLID = """
import re, sys, time
from pipeline.merge import merge
from pipeline.stats import compute_stats
t = time.perf_counter()
merge(sys.argv[1] + "/client.parquet", sys.argv[1] + "/server.parquet", sys.argv[1] + "/m.duckdb")
merged = time.perf_counter() - t
compute_stats(sys.argv[1] + "/m.duckdb")
print(time.perf_counter() - t, re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read())[1], merged)
"""

PANDAS = """
import re, sys, time
import duckdb, pandas as pd
d = sys.argv[1]
t = time.perf_counter()
client = pd.read_parquet(d + "/client.parquet")
server = pd.read_parquet(d + "/server.parquet")
sentinel = (1 << 64) - 1
calls = client[(client["kind"] == "call") & (client["callid"] != sentinel)]
calls = calls[["callid", "rank", "func", "file", "size", "t_start", "t_end"]]
ops = server[server["layer"].isin(["trove", "meta"])]
ops = ops[["server", "layer", "op", "handle", "offset", "size", "t_start", "t_end", "event_id", "callids"]]
ops = ops.assign(n_callids=ops["callids"].map(len))
links = ops.explode("callids").dropna(subset=["callids"]).rename(columns={"callids": "callid"})
links["callid"] = links["callid"].astype("uint64")
call_side = calls.drop(columns="size").rename(columns={"t_start": "call_t_start", "t_end": "call_t_end"})
arrows = links.merge(call_side, on="callid", how="inner")
per_server = arrows.groupby(["callid", "server"]).agg(ops=("event_id", "size"), bytes=("size", "sum"))
fanout = per_server.groupby(level="callid").agg(disk_ops=("ops", "sum"), servers=("ops", "size"),
                                                disk_bytes=("bytes", "sum"))
fanout = calls[["callid", "rank", "func", "size"]].merge(fanout, on="callid", how="left").fillna(0)
stats = fanout.groupby("func")["disk_ops"].agg(["min", "mean", "max"])
arrows.to_parquet(d + "/pandas_arrows.parquet")
fanout.to_parquet(d + "/pandas_fanout.parquet")
seconds = time.perf_counter() - t
rss = re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read())[1]
ours = duckdb.connect(d + "/m.duckdb", read_only=True).execute(
    "SELECT callid, server, event_id, rank, size, n_callids, call_t_end FROM arrows ORDER BY ALL").df()
mine = arrows[["callid", "server", "event_id", "rank", "size", "n_callids", "call_t_end"]].sort_values(
    ["callid", "server", "event_id"])
equal = len(ours) == len(mine) and (ours.to_numpy() == mine.to_numpy()).all()
print(seconds, rss, bool(equal))
"""


def _child(code: str, directory: Path, timeout: float, cap_memory: bool = False
           ) -> tuple[float, float, list[str]] | None:
    """Run ``code`` in a fresh Python; return (seconds, peak RSS in MiB, extra fields) or None if it died.

    Peak RSS is the child's VmHWM: ``ru_maxrss`` would include this process's peak, which
    Linux carries into a child across fork and exec.  With ``cap_memory`` the child's address
    space is capped at 90 % of the RAM, so that one that would exhaust memory fails with
    MemoryError instead of calling in the OOM killer."""
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    cap = lambda: resource.setrlimit(resource.RLIMIT_AS, (int(ram * 0.9), resource.RLIM_INFINITY))  # noqa: E731
    try:
        result = subprocess.run([sys.executable, "-c", code, str(directory)], capture_output=True, text=True,
                                timeout=timeout, preexec_fn=cap if cap_memory else None)
    except subprocess.TimeoutExpired:
        return None
    if result.returncode != 0:
        print(f"  failed: {result.stderr.strip().splitlines()[-1] if result.stderr else result.returncode}",
              file=sys.stderr)
        return None
    seconds, rss, *rest = result.stdout.strip().splitlines()[-1].split()
    return float(seconds), int(rss) / 1024, rest


def thesis_scan(events: int) -> float:
    """Seconds of the thesis' arrow building: for every call, scan every server event."""
    calls = events // 10
    call_ids = list(range(calls))
    event_ids = [i // 10 for i in range(events)]
    t = time.perf_counter()
    arrows = 0
    for cid in call_ids:
        for eid in event_ids:
            if eid == cid:
                arrows += 1
    assert arrows == events
    return time.perf_counter() - t


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench merge", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=[1_000_000, 10_000_000],
                        help="server events per trace (default 1M 10M); synth holds a trace in memory")
    parser.add_argument("--pandas-timeout", type=float, default=900)
    parser.add_argument("--no-thesis", action="store_true", help="skip the O(n^2) scan")
    args = parser.parse_args(argv)
    try:
        import pandas  # noqa: F401
    except ImportError:
        print("python -m bench merge needs pandas: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    figures: dict = {"benchmark": "merge", "sizes": []}
    for events in args.events:
        with tempfile.TemporaryDirectory() as tmp:
            directory = Path(tmp)
            calls = events // 10
            synthesize(SynthOptions(ranks=min(1000, max(1, calls // 100)), calls=calls, fanout=8,
                                    collective_share=0.0), directory)
            ours = _child(CALLID, directory, 3600)
            theirs = _child(PANDAS, directory, args.pandas_timeout, cap_memory=True) if ours else None
        row = {"server_events": events, "calls": calls}
        if ours:
            row.update(callid_seconds=round(ours[0], 2), callid_merge_seconds=round(float(ours[2][0]), 2),
                       callid_events_per_s=round(events / ours[0]), callid_peak_rss_mib=round(ours[1]))
        if theirs:
            row.update(pandas_seconds=round(theirs[0], 2), pandas_peak_rss_mib=round(theirs[1]),
                       same_arrows=theirs[2] == ["True"], speedup=round(theirs[0] / ours[0], 2))
        else:
            row.update(pandas="failed or timed out")
        figures["sizes"].append(row)
        get = row.get
        print(f"{events:>11,} events: callid {get('callid_seconds')} s "
              f"(merge {get('callid_merge_seconds')} s), {get('callid_peak_rss_mib')} MiB"
              f" | pandas {get('pandas_seconds', '-')} s, {get('pandas_peak_rss_mib', '-')} MiB"
              f" | same arrows: {get('same_arrows', '-')} | speed-up {get('speedup', '-')}x", flush=True)
    if not args.no_thesis:
        scan = {n: round(thesis_scan(n), 2) for n in (10_000, 100_000)}
        figures["thesis_scan_seconds"] = scan
        print(f"thesis O(n^2) arrow scan: 10k events {scan[10_000]} s, 100k events {scan[100_000]} s "
              f"({scan[100_000] / scan[10_000]:.0f}x for 10x the events)")
    print(json.dumps(figures))
    return 0
