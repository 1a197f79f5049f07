"""``callid replay``: a traced run replayed against the run itself, and Darshan logs of many ranks.

* ``live``: ``callid run`` of examples/ior.py (independent 64 KiB transfers, write then read), then
  ``callid replay`` of its client log under the same layout with as many replayer processes as the
  run had ranks: the replay's time over the run's (the baseline), same calls and bytes;
* ``dxt``: IOR-like Darshan DXT logs written by ``bench.darshan_log`` (every rank writes its blocks
  with collective calls, then reads them back), replayed with ``--procs 2`` on this machine:
  seconds, calls and events (client rows + server events) per second, OS processes used.

``python -m bench replay [--quick]`` (``--quick``: the 384-rank log only); ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from bench.darshan_log import synthetic_dxt_log
from callid.replay.job import ReplayOptions, replay
from callid.run import RunOptions, run

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ior.py"
#: (ranks, accesses per rank, bytes per access)
LOGS = [(384, 16, 1 << 20), (4096, 16, 64 << 10)]


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


def dxt(out: Path, ranks: int, accesses: int, size: int) -> dict:
    log = out / f"ior-{ranks}.darshan"
    synthetic_dxt_log(log, ranks=ranks, accesses=accesses, size=size, collective=True)
    t0 = time.perf_counter()
    result = replay(ReplayOptions(source=str(log), out=str(out / f"r{ranks}"), procs=2))
    seconds = time.perf_counter() - t0
    events = result.run.client_rows + result.run.server_rows
    return {"ranks": ranks, "segments": sum(result.segments.values()), "calls": result.calls,
            "collective_calls": result.collectives, "events": events, "seconds": round(seconds, 2),
            "calls_per_second": round(result.calls / seconds), "events_per_second": round(events / seconds),
            # the command, mpiexec and its proxy (hydra), the replayers, one metadata and two I/O servers
            "os_processes": 1 + 2 + result.procs + 3}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench replay", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the 384-rank log")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        print("live: callid run of examples/ior.py, then its replay ...", file=sys.stderr)
        base = live(out)
        print(f"  {base['calls']} calls: run {base['run_seconds']} s, replay {base['replay_seconds']} s "
              f"(replay / run {base['replay_over_run']})")
        logs = []
        for ranks, accesses, size in LOGS[:1] if args.quick else LOGS:
            print(f"dxt: {ranks} ranks x {accesses} collective writes + reads of {size >> 10} KiB ...",
                  file=sys.stderr)
            logs.append(dxt(out, ranks, accesses, size))
            f = logs[-1]
            print(f"  {f['segments']} segments -> {f['calls']} calls ({f['collective_calls']} collective) "
                  f"in {f['seconds']} s: {f['calls_per_second']} calls/s, {f['events_per_second']} events/s, "
                  f"{f['os_processes']} OS processes")
    print(json.dumps({"benchmark": "replay", "live": base, "dxt": logs}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
