"""Merge time and peak memory: ``callid merge`` against Polars and pandas making the same arrows and fan-out.

For each trace, ``callid synth`` writes the logs, then each implementation runs in its own
process (so peak RSS is its own), one after the other:

- ``callid merge`` end to end (validation, clock alignment, every table, the warnings the command
  prints), once per output
  format (``--storage duckdb`` then ``parquet``), then ``callid stats`` on the DuckDB output (which
  runs ``callid check`` and ``callid insights`` too; peak RSS: the merge's own);
- Polars (lazy, streaming) computing the same arrows and fan-out from the same logs (without
  clock alignment) and writing them as Parquet; both checked equal to callid's, every column (but
  the disk operations' times, which callid puts on the reference clock);
- pandas doing the same (its arrows checked equal), under a cap of 90 % of the RAM.
- ``callid merge`` as a user runs it, in both formats: the installed entry point, its wall time taken
  from outside (interpreter start and imports included), against the Polars script's wall time as a
  process likewise: issue 43's target, at most 1.25x Polars and 3 GiB peak RSS.

(Polars, pandas, ``callid stats`` and the query run up to :data:`BASELINES_UP_TO` server events.)

Traces: ``--events N`` (10 server events per call: 8 disk operations and 2 request events,
2 servers) and the scale check of issue 23 (``callid synth --ranks 1000 --servers 8 --calls
1000000 --fanout 10 --seed 3``: 14.2 M server events).  Then a query that scans every server
event (bytes per server; and busy time per server, which reads the times the views map) on the
merged output, against the same rows stored as a DuckDB table (how the merge stored them
before its events stayed in the logs); and the thesis' O(n^2) arrow scan at 10 k and 100 k
events.  Needs pandas and Polars: ``pip install -e '.[bench]'``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.command import callid_path, run_command
from pipeline.synth_options import SynthOptions

_PEAK = 're.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read())[1]'

CALLID = f"""
import re, sys, time
from callid import api
d, storage, stats = sys.argv[1], sys.argv[2], sys.argv[3] == "stats"
out = d + ("/m.duckdb" if storage == "duckdb" else "/m")
t = time.perf_counter()
api.merge(d + "/client.parquet", d + "/server.parquet", out, storage=storage)
api.merge_warnings(out)  # (what the command prints after the merge: part of its time and memory)
merged, peak = time.perf_counter() - t, {_PEAK}  # (the merge's own peak: before stats)
if stats:
    api.stats(out)
print(merged, peak, time.perf_counter() - t)
"""

POLARS = f"""
import re, sys, time
import polars as pl
d = sys.argv[1]
SENTINEL = (1 << 64) - 1  # (the synthetic logs' layout is 64 bits)
t = time.perf_counter()
client, server = pl.scan_parquet(d + "/client.parquet"), pl.scan_parquet(d + "/server.parquet")
calls = (client.filter(pl.col("kind") == "call")  # (an unstamped call: no CallID, no arrow, in the fan-out)
         .with_columns(callid=pl.when(pl.col("callid") != SENTINEL).then(pl.col("callid"))))
ops = (server.filter(pl.col("layer").is_in(["trove", "meta"]) & (pl.col("callids").list.len() > 0))
       .select("server", "layer", "op", "handle", "offset", "file_offset", "file_end", "size", "t_start",
               "t_end", "event_id", "holes", "callids", "callid_bytes", "callid_own",
               n_callids=pl.col("callids").list.len(), n_bytes=pl.col("callid_bytes").list.len(),
               n_own=pl.col("callid_own").list.len()))
links = (ops.explode("callids", "callid_bytes", "callid_own")
         .with_columns(share_bytes=pl.when(pl.col("n_callids") == 1).then(pl.col("size"))
                       .when(pl.col("n_bytes") == pl.col("n_callids")).then(pl.col("callid_bytes"))
                       .when(pl.col("size") == 0).then(0),
                       own_bytes=pl.when(pl.col("n_own") == pl.col("n_callids")).then(pl.col("callid_own"))
                       .when(pl.col("n_callids") == 1).then(pl.col("size") - pl.col("holes"))
                       .when(pl.col("size") == 0).then(0)))
arrows = (links.rename({{"callids": "callid", "offset": "disk_offset"}})
          .with_columns(pl.col("file_offset", "file_end").replace(-1, None))
          .join(calls.select("callid", "rank", "func", "file", call_t_start="t_start", call_t_end="t_end"),
                on="callid")
          .select("callid", "rank", "func", "file", "call_t_start", "call_t_end", "server", "layer", "op",
                  "handle", "disk_offset", "file_offset", "file_end", "size", "share_bytes", "own_bytes",
                  "t_start", "t_end", "event_id", "n_callids", exact=pl.col("share_bytes").is_not_null()))
arrows.sink_parquet(d + "/polars_arrows.parquet")
per_server = (pl.scan_parquet(d + "/polars_arrows.parquet").group_by("callid", "server")
              .agg(ops=pl.len(), share_bytes=pl.col("share_bytes").sum(), own_bytes=pl.col("own_bytes").sum(),
                   inexact=(~pl.col("exact")).sum()))
per_call = (per_server.sort("callid", "server").group_by("callid")
            .agg(disk_ops=pl.col("ops").sum(), servers=pl.len(), share_bytes=pl.col("share_bytes").sum(),
                 own_bytes=pl.col("own_bytes").sum(), inexact_arrows=pl.col("inexact").sum(),
                 bytes_per_server=pl.struct("server", "ops", "share_bytes", "own_bytes")))
fanout = (calls.select("callid", "rank", "func", "size").join(per_call, on="callid", how="left")
          .with_columns(pl.col("disk_ops", "servers", "share_bytes", "own_bytes", "inexact_arrows")
                        .fill_null(0)))
fanout.sink_parquet(d + "/polars_fanout.parquet")
print(time.perf_counter() - t, {_PEAK})
"""

PANDAS = f"""
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
links = ops.explode("callids").dropna(subset=["callids"]).rename(columns={{"callids": "callid"}})
links["callid"] = links["callid"].astype("uint64")
call_side = calls.drop(columns="size").rename(columns={{"t_start": "call_t_start", "t_end": "call_t_end"}})
arrows = links.merge(call_side, on="callid", how="inner")
per_server = arrows.groupby(["callid", "server"]).agg(ops=("event_id", "size"), bytes=("size", "sum"))
fanout = per_server.groupby(level="callid").agg(disk_ops=("ops", "sum"), servers=("ops", "size"),
                                                disk_bytes=("bytes", "sum"))
fanout = calls[["callid", "rank", "func", "size"]].merge(fanout, on="callid", how="left").fillna(0)
arrows.to_parquet(d + "/pandas_arrows.parquet")
fanout.to_parquet(d + "/pandas_fanout.parquet")
seconds = time.perf_counter() - t
rss = {_PEAK}
ours = duckdb.connect(d + "/m.duckdb", read_only=True).execute(
    "SELECT callid, server, event_id, rank, size, n_callids, call_t_end FROM arrows ORDER BY ALL").df()
mine = arrows[["callid", "server", "event_id", "rank", "size", "n_callids", "call_t_end"]].sort_values(
    ["callid", "server", "event_id"])
equal = len(ours) == len(mine) and (ours.to_numpy() == mine.to_numpy()).all()
print(seconds, rss, bool(equal))
"""

#: callid's arrows and fan-out against Polars', as order-free digests of every column
SAME = """
import sys
import duckdb
from pipeline.merged import open_merged
d = sys.argv[1]
# (a merged output's handle reads its own files only: Polars' through a plain connection)
ours, plain = open_merged(d + "/m.duckdb").con, duckdb.connect()
ARROWS = ("callid, rank, func, file, call_t_start, call_t_end, server, layer, op, handle, disk_offset, "
          "file_offset, file_end, size, share_bytes, own_bytes, event_id, n_callids::BIGINT, exact")
# (times: see the doc)
FANOUT = ("callid, rank, func, size, disk_ops::BIGINT, servers::BIGINT, share_bytes::BIGINT, "
          "own_bytes::BIGINT, "
          "inexact_arrows::BIGINT, bytes_per_server::STRUCT(server VARCHAR, ops BIGINT, share_bytes BIGINT, "
          "own_bytes BIGINT)[]")
def digest(con, table, columns):
    return con.execute(f"SELECT count(*), sum(hash({columns})::HUGEINT) FROM {table}").fetchall()[0]
same = all(digest(ours, table, cols) == digest(plain, f"read_parquet('{d}/polars_{table}.parquet')", cols)
           for table, cols in (("arrows", ARROWS), ("fanout", FANOUT)))
print(0, 0, same)
"""

#: a query scanning every server event, on the merged output and on the same rows as a DuckDB table
QUERIES = {"bytes per server": "SELECT server, sum(size) FROM server_ops GROUP BY server ORDER BY server",
           "busy time per server": "SELECT server, sum(t_end - t_start), max(t_end) FROM server_ops "
                                   "GROUP BY server ORDER BY server"}
SCAN = f"""
import json, sys, time, duckdb
from pipeline.merged import DIR_VARIABLE, open_merged
d = sys.argv[1]
table = duckdb.connect(d + "/table.duckdb")  # the rows the view shows, stored as a table
table.execute(f"ATTACH '{{d}}/m.duckdb' AS m (READ_ONLY)")
table.execute(f"SET VARIABLE {{DIR_VARIABLE}} = '{{d}}/m.duckdb.data'")
table.execute("CREATE TABLE server_ops AS SELECT * FROM m._server_ops")
table.close()
table = duckdb.connect(d + "/table.duckdb", read_only=True)
views = open_merged(d + "/m.duckdb").con
out = {{}}
for name, sql in {QUERIES!r}.items():
    assert views.execute(sql).fetchall() == table.execute(sql).fetchall()
    best = {{}}
    for label, con in (("views", views), ("table", table)):
        times = []
        for _ in range(7):
            t = time.perf_counter()
            con.execute(sql).fetchall()
            times.append(time.perf_counter() - t)
        best[label] = min(times)
    out[name] = best
print(0, 0, json.dumps(out, separators=(",", ":")).replace(" ", "\\\\u0020"))
"""


def _child(code: str, args: list[str], timeout: float, cap_memory: bool = False
           ) -> tuple[float, float, list[str], float] | None:
    """Run ``code`` in a fresh Python; return (seconds it timed, peak RSS in MiB, extra fields, the
    process's wall seconds: interpreter start and imports included) or None if it died.

    Peak RSS is the child's VmHWM: ``ru_maxrss`` would include this process's peak, which
    Linux carries into a child across fork and exec.  With ``cap_memory`` the child's address
    space is capped at 90 % of the RAM, so that one that would exhaust memory fails with
    MemoryError instead of calling in the OOM killer."""
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    cap = lambda: resource.setrlimit(resource.RLIMIT_AS, (int(ram * 0.9), resource.RLIM_INFINITY))  # noqa: E731
    start = time.perf_counter()
    try:
        result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                                timeout=timeout, preexec_fn=cap if cap_memory else None)
    except subprocess.TimeoutExpired:
        print("  timed out", file=sys.stderr)
        return None
    if result.returncode != 0:
        print(f"  failed: {result.stderr.strip().splitlines()[-1] if result.stderr else result.returncode}",
              file=sys.stderr)
        return None
    wall = time.perf_counter() - start
    seconds, rss, *rest = result.stdout.strip().splitlines()[-1].split()
    return float(seconds), int(rss) / 1024, rest, wall


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


def _traces(events: list[int], scale_check: bool) -> list[tuple[str, SynthOptions]]:
    """The traces to merge: ``events`` server events each (10 per call), and the scale check's."""
    out = [(f"{n / 1e6:g} M events", SynthOptions(ranks=min(1000, max(1, n // 1000)), calls=n // 10, fanout=8,
                                                  collective_share=0.0)) for n in events]
    if scale_check:
        out.append(("scale check", SynthOptions(ranks=1000, servers=8, calls=1_000_000, fanout=10, seed=3)))
    return sorted(out, key=lambda t: t[1].calls * t[1].fanout)


#: beyond this many server events only callid merge runs (pandas runs out of memory; callid stats, whose
#: checks spill gigabytes, and the baselines' outputs would not fit on this machine's disk beside the trace)
BASELINES_UP_TO = 20_000_000


def _remove(directory: Path, *names: str) -> None:
    """Delete outputs as soon as they are read: a 100 M-event trace takes 3.6 GB of disk already."""
    for name in names:
        for path in directory.glob(name):
            shutil.rmtree(path) if path.is_dir() else path.unlink()


#: the targets of ``callid merge`` as a user runs it: its wall time over the Polars script's (a process
#: too), its peak RSS
MAX_OVER_POLARS = 1.25
MAX_MERGE_MIB = 3072


def _synth(options: SynthOptions, directory: Path) -> dict:
    """``callid synth`` of ``options`` into ``directory`` (a process: this one stays small, so that the
    peak RSS the children report is theirs); its summary."""
    flags = {"--ranks": options.ranks, "--servers": options.servers, "--calls": options.calls,
             "--fanout": options.fanout, "--collective-share": options.collective_share,
             "--seed": options.seed}
    done = run_command([callid_path(), "synth", *(str(x) for kv in flags.items() for x in kv), "-d",
                        str(directory), "--json"], directory, "synth", 3600)
    if done["exit"] != 0:
        raise SystemExit(f"callid synth failed: {done['stderr_last']}")
    return json.loads((directory / "synth.out").read_text())


def _merge_command(directory: Path, storage: str) -> dict:
    """``callid merge`` of the trace as a user runs it (the entry point, a process), its output removed."""
    out = directory / ("m.duckdb" if storage == "duckdb" else "m")
    done = run_command([callid_path(), "merge", str(directory / "client.parquet"),
                        str(directory / "server.parquet"), "-o", str(out), "--storage", storage],
                       directory, f"merge-{storage}", 3600)
    _remove(directory, "m.duckdb*", "m")
    return done


def _case(label: str, options: SynthOptions, pandas_timeout: float) -> dict:
    """Synthesize one trace and run every implementation on it; print and return its figures."""
    with tempfile.TemporaryDirectory(prefix="callid-bench-merge-") as tmp:
        directory = Path(tmp)
        summary = _synth(options, directory)
        args = [str(directory)]
        baselines = summary["server_ops"] <= BASELINES_UP_TO
        duck = _child(CALLID, [*args, "duckdb", "stats" if baselines else "-"], 3600)
        if not baselines:  # (the disk holds the trace and one output)
            _remove(directory, "m.duckdb*")
        parquet = _child(CALLID, [*args, "parquet", "-"], 3600)  # (right after: both on a warm cache)
        _remove(directory, "m")
        polars = same = pandas = queries = None
        if baselines:
            polars = _child(POLARS, args, 3600)
            same = _child(SAME, args, 3600) if duck and polars else None
            _remove(directory, "polars_*")
            queries = _child(SCAN, args, 3600) if duck else None
            _remove(directory, "table.duckdb*")
            pandas = _child(PANDAS, args, pandas_timeout, cap_memory=True) if duck else None
            _remove(directory, "pandas_*")
        _remove(directory, "m.duckdb*")
        commands = {storage: _merge_command(directory, storage) for storage in ("duckdb", "parquet")}
    row: dict = {"trace": label, "calls": summary["calls"], "server_events": summary["server_ops"],
                 "arrows": summary["arrows"]}
    if duck:
        row.update(merge_s=round(duck[0], 2), merge_rss_mib=round(duck[1]))
        if baselines:
            row["merge_and_stats_s"] = round(float(duck[2][0]), 2)
    if parquet:
        row.update(merge_parquet_s=round(parquet[0], 2), merge_parquet_rss_mib=round(parquet[1]))
    for storage, done in commands.items():  # (as a user runs it)
        key = "merge_cli" if storage == "duckdb" else "merge_parquet_cli"
        if done["exit"] == 0:
            row.update({f"{key}_s": done["seconds"], f"{key}_rss_mib": round(done["peak_mib"])})
    if polars:
        row.update(polars_s=round(polars[0], 2), polars_process_s=round(polars[3], 2),
                   polars_rss_mib=round(polars[1]), polars_same=same is not None and same[2] == ["True"])
        if duck:
            row["merge_over_polars"] = round(duck[0] / polars[0], 2)
        if parquet:
            row["merge_parquet_over_polars"] = round(parquet[0] / polars[0], 2)
        for key in ("merge_cli", "merge_parquet_cli"):
            if f"{key}_s" in row:
                row[f"{key}_over_polars"] = round(row[f"{key}_s"] / row["polars_process_s"], 2)
                row[f"{key}_met"] = (row[f"{key}_over_polars"] <= MAX_OVER_POLARS
                                     and row[f"{key}_rss_mib"] <= MAX_MERGE_MIB)
    if pandas:
        row.update(pandas_s=round(pandas[0], 2), pandas_rss_mib=round(pandas[1]),
                   pandas_same=pandas[2] == ["True"])
    elif baselines:
        row["pandas"] = "failed or timed out"
    if queries:
        found = json.loads(queries[2][0])
        row["queries_s"] = {name: {k: round(v, 4) for k, v in t.items()} for name, t in found.items()}
    get = row.get
    print(f"{label} ({row['server_events']:,} server events, {row['calls']:,} calls, "
          f"{row['arrows']:,} arrows):\n"
          f"  callid merge  duckdb {get('merge_s')} s, {get('merge_rss_mib')} MiB"
          f" | parquet {get('merge_parquet_s')} s, {get('merge_parquet_rss_mib')} MiB"
          f" | merge + stats {get('merge_and_stats_s', '-')} s\n"
          f"  callid merge as a user runs it: duckdb {get('merge_cli_s')} s, {get('merge_cli_rss_mib')} MiB"
          f" | parquet {get('merge_parquet_cli_s')} s, {get('merge_parquet_cli_rss_mib')} MiB", flush=True)
    if baselines:
        print(f"  polars        {get('polars_s')} s, {get('polars_rss_mib')} MiB, same arrows and fan-out: "
              f"{get('polars_same')} | merge / polars: duckdb {get('merge_over_polars')}, parquet "
              f"{get('merge_parquet_over_polars')}\n"
              f"  as processes: polars {get('polars_process_s')} s | callid merge / polars: duckdb "
              f"{get('merge_cli_over_polars')}, parquet {get('merge_parquet_cli_over_polars')} (target <= "
              f"{MAX_OVER_POLARS}x and {MAX_MERGE_MIB} MiB: duckdb {_met(get('merge_cli_met'))}, parquet "
              f"{_met(get('merge_parquet_cli_met'))})\n"
              f"  pandas        {get('pandas_s', '-')} s, {get('pandas_rss_mib', '-')} MiB, same arrows: "
              f"{get('pandas_same', '-')}", flush=True)
    for name, t in get("queries_s", {}).items():
        print(f"  query '{name}' on server_ops: {t['views']:.4f} s on the merged output, "
              f"{t['table']:.4f} s as a DuckDB table ({t['views'] / t['table']:.2f}x)", flush=True)
    return row


def _met(verdict: bool | None) -> str:
    return "-" if verdict is None else "met" if verdict else "NOT met"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench merge", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="*", default=[1_000_000, 10_000_000],
                        help="server events per trace (default 1M 10M; add 100000000 for the linear check)")
    parser.add_argument("--no-scale-check", action="store_true", help="skip issue 23's 14.2 M-event trace")
    parser.add_argument("--pandas-timeout", type=float, default=900)
    parser.add_argument("--no-thesis", action="store_true", help="skip the O(n^2) scan")
    args = parser.parse_args(argv)
    try:
        import pandas  # noqa: F401
        import polars  # noqa: F401
    except ImportError:
        print("python -m bench merge needs pandas and polars: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    figures: dict = {"benchmark": "merge", "traces": []}
    for label, options in _traces(args.events, not args.no_scale_check):
        figures["traces"].append(_case(label, options, args.pandas_timeout))
    merged = [r for r in figures["traces"] if "merge_s" in r]
    tenfold = [(a, b) for a in merged for b in merged if 9.5 < b["server_events"] / a["server_events"] < 10.5]
    for small, large in tenfold:
        for key, what in (("merge_s", "duckdb"), ("merge_parquet_s", "parquet")):
            if key in small and key in large:
                ratio = round(large[key] / small[key], 2)
                figures[f"{what}_{large['trace']}_over_{small['trace']}".replace(" ", "_")] = ratio
                print(f"{large['trace']} take {ratio:.2f}x the time of {small['trace']} ({what})", flush=True)
    if not args.no_thesis:
        scan = {n: round(thesis_scan(n), 2) for n in (10_000, 100_000)}
        figures["thesis_scan_seconds"] = scan
        print(f"thesis O(n^2) arrow scan: 10k events {scan[10_000]} s, 100k events {scan[100_000]} s "
              f"({scan[100_000] / scan[10_000]:.0f}x for 10x the events)")
    print(json.dumps(figures))
    return 0
