"""Analysis time and peak memory: ``callid stats``, ``check``, ``insights`` and ``report`` against the merge.

Issue 43's targets: each analysis command takes at most 1.5x the time of ``callid merge`` on the
same trace, and at most 2 GiB peak RSS; on about 100 M server events, at most 8 GiB (its times said,
the ratio not a target).

For each trace ``callid synth`` writes the logs in the shape of issue 23's scale check (``--ranks
1000 --servers 8 --fanout 10 --seed 3``), ``--calls`` sizing it: ``1M`` (70 k calls, about 1.0 M
server events), ``10M`` (700 k, about 9.9 M), ``scale`` (the scale check itself, 1 M calls, 14.2 M) and
``100M`` (7 M calls, about 100 M: 4 GB of logs, 7 GB of disk in all).
Then ``callid merge`` writes a DuckDB file, and ``callid stats --json``, ``callid check --json``,
``callid insights --json`` and ``callid report -o page.html --json`` run on it, one after the other.
Every command runs as a user runs it: the installed ``callid`` entry point in its own process
(start-up and imports included), its wall time measured here and its peak RSS the ``ru_maxrss``
that ``os.wait4`` reports (which also counts this process's own small peak, carried across the
exec: printed as the floor).  ``check`` exits 1 when it finds an error-severity finding: that is
a result, not a failure, when it printed its JSON.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
from pathlib import Path

from bench.command import callid_path, run_command

#: trace name -> calls (the rest of the scale check's options unchanged)
SIZES = {"1M": 70_000, "10M": 700_000, "scale": 1_000_000, "100M": 7_000_000}
SHAPE = ["--ranks", "1000", "--servers", "8", "--fanout", "10", "--seed", "3"]
MAX_OVER_MERGE = 1.5
MAX_PEAK_MIB = 2048
#: the traces whose targets differ: peak RSS only (MiB)
LARGE_PEAK_MIB = {"100M": 8192}


def _summary(directory: Path) -> dict:
    """The JSON summary ``callid synth`` printed (empty if none)."""
    try:
        return json.loads((directory / "synth.out").read_text())
    except (OSError, ValueError):
        return {}


def _printed_json(path: Path) -> bool:
    """Whether a command printed a whole JSON document, by its ends (``check``'s can be 100s of MiB: not
    loaded here, which would raise this process's peak RSS and with it the next child's ``ru_maxrss``)."""
    with open(path, "rb") as f:
        head = f.read(1)
        f.seek(max(0, path.stat().st_size - 4))
        tail = f.read().strip()
    return head in (b"{", b"[") and tail[-1:] in (b"}", b"]")


def _assess(row: dict, merge: dict | None, trace: str) -> None:
    """Add ``ok``, a note, the ratio to the merge and the targets' verdicts to one command's row."""
    findings = row["command"] == "check" and row["exit"] == 1 and row["json_ok"]
    row["ok"] = not row["timed_out"] and (row["exit"] == 0 or findings)
    row["note"] = ("timed out" if row["timed_out"] else "findings (exit 1)" if findings else
                   "" if row["ok"] else f"exit {row['exit']}: {row['stderr_last']}")
    if row["command"] == "merge" or not row["ok"]:
        return
    row["peak_met"] = row["peak_mib"] <= LARGE_PEAK_MIB.get(trace, MAX_PEAK_MIB)
    if merge and merge["ok"]:
        row["over_merge"] = round(row["seconds"] / merge["seconds"], 2)
        if trace not in LARGE_PEAK_MIB:
            row["ratio_met"] = row["over_merge"] <= MAX_OVER_MERGE


def _trace(name: str, calls: int, timeout: float) -> dict:
    """Synthesize, merge and analyse one trace in its own temporary directory; return its figures."""
    callid = callid_path()
    with tempfile.TemporaryDirectory(prefix=f"callid-bench-analysis-{name}-") as tmp:
        d = Path(tmp)
        print(f"{name}: callid synth --calls {calls} ...", file=sys.stderr, flush=True)
        synth = run_command([callid, "synth", *SHAPE, "--calls", str(calls), "-d", str(d / "logs"), "--json"],
                            d, "synth", timeout)
        summary = _summary(d)
        trace = {"trace": name, "calls": calls, **{k: summary.get(k) for k in ("server_ops", "arrows")},
                 "synth_s": synth["seconds"], "commands": []}
        if synth["exit"] != 0 or synth["timed_out"]:
            trace["synth_error"] = "timed out" if synth["timed_out"] else f"exit {synth['exit']}: " \
                                                                           f"{synth['stderr_last']}"
            return trace
        db, page = str(d / "m.duckdb"), str(d / "page.html")
        commands = {"merge": ["merge", str(d / "logs/client.parquet"), str(d / "logs/server.parquet"),
                              "-o", db, "--json"],
                    "stats": ["stats", db, "--json"], "check": ["check", db, "--json"],
                    "insights": ["insights", db, "--json"], "report": ["report", db, "-o", page, "--json"]}
        merge = None
        for command, args in commands.items():
            print(f"{name}: callid {command} ...", file=sys.stderr, flush=True)
            row = {"command": command, **run_command([callid, *args], d, command, timeout)}
            row["json_ok"] = _printed_json(d / f"{command}.out")
            row["stdout_mib"] = round((d / f"{command}.out").stat().st_size / 2**20, 2)
            _assess(row, merge, name)
            print(f"{name}: callid {command}: {row['seconds']} s, {row['peak_mib']} MiB {row['note']}",
                  file=sys.stderr, flush=True)
            trace["commands"].append(row)
            if command == "merge":
                merge = row
                if not row["ok"]:  # (nothing to analyse)
                    break
    return trace


def _verdict(row: dict, key: str) -> str:
    return "-" if key not in row else "met" if row[key] else "NOT met"


def _print(trace: dict) -> None:
    """One table per trace: a line per command."""
    events = f"{trace['server_ops']:,}" if trace.get("server_ops") is not None else "?"
    print(f"\n{trace['trace']}: {trace['calls']:,} calls, {events} server events, synth {trace['synth_s']} s")
    if "synth_error" in trace:
        print(f"  synth failed: {trace['synth_error']}")
        return
    peak = f"<= {LARGE_PEAK_MIB.get(trace['trace'], MAX_PEAK_MIB) // 1024} GiB"
    print(f"  {'command':9} {'exit':>4} {'wall s':>8} {'peak MiB':>9} {'/ merge':>8} "
          f"{'<= 1.5x':>8} {peak:>8} {'stdout MiB':>10}  note")
    for row in trace["commands"]:
        exit_code = "-" if row["timed_out"] else str(row["exit"])
        ratio = f"{row['over_merge']:.2f}" if "over_merge" in row else "-"
        verdicts = f"{_verdict(row, 'ratio_met'):>8} {_verdict(row, 'peak_met'):>8}"
        print(f"  {row['command']:9} {exit_code:>4} {row['seconds']:>8.2f} {row['peak_mib']:>9.1f} "
              f"{ratio:>8} {verdicts} {row['stdout_mib']:>10.2f}  {row['note'][:100]}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench analysis", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), default=["1M"],
                        help="traces to run (default 1M: a few minutes)")
    parser.add_argument("--large", action="store_true",
                        help="add the 10M, scale and 100M traces (about 25 minutes)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per command before it is killed")
    args = parser.parse_args(argv)
    names = [n for n in SIZES if n in args.sizes or (args.large and n != "1M")]
    targets = {"over_merge": MAX_OVER_MERGE, "peak_mib": MAX_PEAK_MIB, "large_peak_mib": LARGE_PEAK_MIB}
    figures: dict = {"benchmark": "analysis", "targets": targets, "traces": []}
    for name in names:
        trace = _trace(name, SIZES[name], args.timeout)
        _print(trace)
        figures["traces"].append(trace)
    rows = [(t["trace"], r) for t in figures["traces"] for r in t["commands"] if r["command"] != "merge"]
    figures["all_met"] = bool(rows) and all(r.get("peak_met") and (t in LARGE_PEAK_MIB or r.get("ratio_met"))
                                            for t, r in rows)
    figures["bench_peak_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(f"\ntargets (analysis command / merge <= {MAX_OVER_MERGE}x, peak <= 2 GiB; 100M: peak <= 8 GiB): "
          f"{'all met' if figures['all_met'] else 'NOT all met'}; "
          f"peak RSS floor (this process's own): {figures['bench_peak_mib']} MiB", flush=True)
    print(json.dumps(figures))
    return 0
