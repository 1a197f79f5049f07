"""``python -m bench NAME [OPTIONS]``: run one benchmark (``python -m bench`` lists them)."""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "merge": "callid merge against a pandas implementation (1M, 10M events), and the thesis' O(n^2) scan",
    "view": "timeline generation for a ~100 k-event trace, against fetching the same rows",
    "clocks": "clock alignment on synthetic 1 M-call traces and a real skewed run, against the truth",
    "overhead": "traced (--callid) vs untraced (--no-callid) runs, interleaved, the cost per call (Python "
                "and C), and the C path's FUSE client's bandwidth",
    "fs": "simulated file system bandwidth against raw socket + pwrite, its protocol floor and plain MPI-IO",
    "replay": "callid replay of a traced run against the run, and of Darshan DXT logs of 384 and 4096 ranks",
    "analysis": "callid stats, check, insights and report: time and peak memory against callid merge",
    "diagnose": "faults and mistakes planted in standard workloads: does callid insights name each first?",
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in BENCHMARKS:
        names = "\n".join(f"  {k:8} {v}" for k, v in BENCHMARKS.items())
        print("usage: python -m bench NAME [OPTIONS]\n" + names, file=sys.stderr)
        return 2
    return importlib.import_module(f"bench.{argv[0]}").main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
