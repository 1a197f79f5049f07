"""Timeline generation time for a trace of about 100 k events (target: at most 10 s).

A real traced run (mpi-io-test, 4 KiB small-I/O writes and reads) makes the trace;
``callid view`` is then timed against a baseline measured in the same run:
fetching the same rows from the merged database, which any page must at least do.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from callid import api
from callid.run import RunOptions, run
from pipeline.merge import merge

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "mpi_io_test.py"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench view", description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=4500, help="4 KiB blocks per rank (default 4500)")
    parser.add_argument("--ranks", type=int, default=4)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        print(f"tracing mpi-io-test: {args.ranks} ranks x {args.iterations} blocks of 4 KiB ...",
              file=sys.stderr)
        result = run(RunOptions(target=[str(EXAMPLE), "-b", "4096", "-i", str(args.iterations)],
                                np=args.ranks, out=str(out), quiet=True))
        db = out / "m.duckdb"
        merge(str(result.client), str(result.server), str(db))
        con = duckdb.connect(str(db), read_only=True)
        t0 = time.perf_counter()
        con.execute("SELECT * FROM calls").fetchall()
        con.execute("SELECT * FROM server_ops").fetchall()
        con.execute("SELECT * FROM arrows").fetchall()
        baseline = time.perf_counter() - t0
        con.close()
        t0 = time.perf_counter()
        summary = api.view(db, out / "timeline.html")
        events = summary["detail_events"] + summary["summarised_events"]
        seconds = time.perf_counter() - t0
        size = (out / "timeline.html").stat().st_size
    figures = {"benchmark": "view", "events": events, "seconds": round(seconds, 3),
               "baseline_fetch_seconds": round(baseline, 3),
               "ratio_to_baseline": round(seconds / baseline, 2),
               "events_per_second": round(events / seconds), "page_mib": round(size / 2**20, 2),
               "target_seconds": 10, "met": seconds <= 10}
    verdict = "met" if figures["met"] else "NOT met"
    print(f"timeline of {events} events in {seconds:.2f} s ({figures['ratio_to_baseline']}x fetching the "
          f"rows, {figures['page_mib']} MiB page); target at most 10 s: {verdict}")
    print(json.dumps(figures))
    return 0
