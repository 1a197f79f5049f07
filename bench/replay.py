"""``callid replay``: a traced run replayed against the run itself, and Darshan logs of many ranks.

* ``live``: ``callid run`` of examples/ior.py (independent 64 KiB transfers, write then read), then
  ``callid replay`` of its client log under the same layout with as many replayer processes as the
  run had ranks: the replay's time over the run's (the baseline), same calls and bytes;
* ``dxt``: IOR-like Darshan DXT logs written by ``bench.darshan_log``, each replayed by ``callid
  replay --procs 2 --json`` as a user runs it (a child process): 1024 ranks writing then reading 4 KiB
  blocks with independent calls, about 1 k, 10 k and 100 k DXT segments; seconds, calls and events
  (client rows + server events) per second, peak memory (the largest process of the replay: the
  command, a replayer or a server), and the calls' lag (how long after due each started, asap) at the
  50th, 95th and 99th percentiles and its maximum.

``python -m bench replay [--quick]`` (``--quick``: the 1 k and 10 k-segment logs); ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from bench.darshan_log import synthetic_dxt_log
from callid.replay.job import ReplayOptions, replay
from callid.run import RunOptions, run

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ior.py"
RANKS = 1024
#: accesses per rank (half writes, half reads): about 1 k, 10 k and 100 k segments of 1024 ranks
ACCESSES = [1, 5, 50]
BLOCK = 4096

def live(out: Path, ranks: int = 2, segments: int = 1024) -> dict:
    """A traced IOR run and its replay; times from start to end of each (servers included)."""
    t0 = time.perf_counter()
    result = run(RunOptions(target=[str(EXAMPLE), "-b", "64k", "-t", "64k", "-s", str(segments), "-k"],
                            np=ranks, out=str(out / "live"), quiet=True))
    run_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = replay(ReplayOptions(source=str(result.client), out=str(out / "again"), procs=ranks))
    replay_s = time.perf_counter() - t0
    return {"ranks": ranks, "calls": again.calls, "run_seconds": round(run_s, 2),
            "replay_seconds": round(replay_s, 2), "replay_over_run": round(replay_s / run_s, 3)}


def dxt(out: Path, accesses: int) -> dict:
    """A 1024-rank log of ``accesses`` independent writes and as many reads per rank, replayed."""
    log = out / f"ior-{accesses}.darshan"
    synthetic_dxt_log(log, ranks=RANKS, accesses=accesses, size=BLOCK, collective=False, gap=0.001)
    t0 = time.perf_counter()
    replayed = out / f"r{accesses}"
    res = subprocess.run([sys.executable, "-m", "callid.cli", "replay", str(log), "-d", str(replayed),
                          "--procs", "2", "--json"], capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if res.returncode:
        raise SystemExit(f"callid replay failed: {res.stderr.strip()[-2000:]}")
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # (the largest so far)
    summary = json.loads(res.stdout)
    lag = duckdb.sql(f"""
        SELECT quantile_disc(lag, [0.5, 0.95, 0.99]), max(lag)
        FROM read_parquet('{replayed / "client.parquet"}') WHERE lag IS NOT NULL""").fetchall()[0]
    events = summary["client_rows"] + summary["server_rows"]
    calls = summary["calls"]
    return {"ranks": RANKS, "segments": sum(summary["segments"].values()), "calls": calls, "events": events,
            "seconds": round(seconds, 2), "calls_per_second": round(calls / seconds),
            "events_per_second": round(events / seconds), "peak_mib": round(peak_mib),
            "lag_ms": dict(zip(("p50", "p95", "p99", "max"), (v / 1e6 for v in (*lag[0], lag[1]))))}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench replay", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the 1 k and 10 k-segment logs")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        print("live: callid run of examples/ior.py, then its replay ...", file=sys.stderr)
        base = live(out)
        print(f"  {base['calls']} calls: run {base['run_seconds']} s, replay {base['replay_seconds']} s "
              f"(replay / run {base['replay_over_run']})")
        logs = []
        for accesses in ACCESSES[:2] if args.quick else ACCESSES:
            print(f"dxt: {RANKS} ranks x {accesses} independent writes + reads of {BLOCK >> 10} KiB ...",
                  file=sys.stderr)
            logs.append(dxt(out, accesses))
            f, lag = logs[-1], logs[-1]["lag_ms"]
            print(f"  {f['segments']} segments -> {f['calls']} calls in {f['seconds']} s: "
                  f"{f['calls_per_second']} calls/s, {f['events_per_second']} events/s, "
                  f"peak {f['peak_mib']} MiB (largest process so far); lag "
                  + ", ".join(f"{k} {v:.3f} ms" for k, v in lag.items()))
    print(json.dumps({"benchmark": "replay", "live": base, "dxt": logs}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
