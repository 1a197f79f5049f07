"""Tracing overhead: ``--callid`` against ``--no-callid`` (and tracing off), and the cost per call.

Workloads, each a real ``callid run`` (servers, ranks under mpiexec, logs written):

* ``mpi-io-test 1MiB``: ``examples/mpi_io_test.py -b 1MiB`` (writes, then reads back);
* ``small-io 4KiB``: ``examples/mpi_io_test.py -b 4KiB --no-read`` (small-I/O writes);
* ``collective``: ``examples/collective_write.py`` (two-phase collective buffering).

Each runs in three modes, interleaved A B C, B C A, C A B ...: ``callid`` (stamped and
propagated), ``no-callid`` (traced, nothing stamped: the baseline), and ``off``
(nothing stamped and neither ranks nor servers log: a mode kept for this
measurement only).  Printed per workload: the median wall time of the whole run
and of the workload's own timed I/O (mpi-io-test reports it), the median of the
per-round ratios callid / no-callid and their spread (min-max).

The cost per call is measured in this process over 100 k calls: stamping a CallID and
logging one call row (flushed to Parquet as the runs do), against an empty loop; and
the whole tracing wrapper (``MPI_File_get_position`` traced against the same call on
the untraced ``MPI.File``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = {"callid": dict(callid=True), "no-callid": dict(callid=False),
         "off": dict(callid=False, client_events=False, server_events=False)}


def workloads(quick: bool) -> dict[str, tuple[int, list[str]]]:
    """name -> (ranks, target)."""
    ex = ROOT / "examples"
    n1, n4, nc = (64, 1000, 16) if quick else (512, 8000, 64)
    return {
        "mpi-io-test 1MiB": (2, [str(ex / "mpi_io_test.py"), "-b", "1MiB", "-i", str(n1), "--json"]),
        "small-io 4KiB": (2, [str(ex / "mpi_io_test.py"), "-b", "4KiB", "-i", str(n4), "--no-read",
                              "--json"]),
        "collective": (4, [str(ex / "collective_write.py"), "--block", "256KiB", "--blocks", str(nc),
                           "--cb-nodes", "2"]),
    }


def _one(ranks: int, target: list[str], mode: str, out: Path) -> tuple[float, float | None]:
    """Wall seconds of one run, and the workload's own I/O seconds when it reports them."""
    from callid.run import RunOptions, run

    shutil.rmtree(out, ignore_errors=True)  # every run starts from an empty file system
    t0 = time.perf_counter()
    result = run(RunOptions(target=target, np=ranks, servers=2, out=str(out), capture=True, timeout=600,
                            **MODES[mode]))
    wall = time.perf_counter() - t0
    shutil.rmtree(out, ignore_errors=True)
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return wall, None
    figures = json.loads(lines[-1])
    if not figures.get("check", True):
        raise RuntimeError(f"{target[0]}: data check failed")
    return wall, figures["write_s"] + (figures.get("read_s") or 0)


def per_call_costs(calls: int, directory: Path) -> dict[str, float]:
    """µs per call: stamping + logging alone, and the traced wrapper against the untraced call."""
    from mpi4py import MPI

    from callid.mpiio import file as traced
    from callid.mpiio.record import Record
    from callid_core import clock

    tracer = traced.Tracer(0, str(directory / "calls"))
    stamp, log, now = tracer.next_callid, tracer.trace.call, clock.now
    loop = _timed(lambda: [None for _ in range(calls)])

    def stamp_and_log() -> None:  # what traced._call adds to a call: a Record filled in and logged
        for _ in range(calls):
            t0 = now()
            rec = Record(stamp(), func="MPI_File_write_at", collective=False)
            rec.file, rec.fid, rec.offset, rec.size, rec.count = "/pvfs2/f", 1, 4096, 4096, 4096
            rec.datatype, rec.bytes = "MPI_BYTE", 4096
            rec.t_start, rec.t_end, rec.error = t0, now(), None
            log(rec)
        tracer.trace.close()

    def untimed_clock() -> None:
        for _ in range(calls):
            now(), now()

    logging = _timed(stamp_and_log) - _timed(untimed_clock)
    fh = traced._BaseFile.Open(MPI.COMM_SELF, str(directory / "plain.dat"), MPI.MODE_RDWR | MPI.MODE_CREATE)
    untraced = _timed(lambda: [traced._BaseFile.Get_position(fh) for _ in range(calls)])
    fh.Close()
    traced.install(tracer)
    try:
        tf = MPI.File.Open(MPI.COMM_SELF, str(directory / "traced.dat"), MPI.MODE_RDWR | MPI.MODE_CREATE)
        wrapped = _timed(lambda: [tf.Get_position() for _ in range(calls)])
        tf.Close()
    finally:
        traced.uninstall()
    return {"stamp_and_log_us": (logging - loop) / calls * 1e6,
            "untraced_call_us": (untraced - loop) / calls * 1e6,
            "traced_call_us": (wrapped - loop) / calls * 1e6,
            "wrapper_us": (wrapped - untraced) / calls * 1e6}


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _spread(values: list[float]) -> str:
    return f"{min(values):.3f}-{max(values):.3f}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench overhead", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="rounds of callid / no-callid / off runs")
    parser.add_argument("--calls", type=int, default=100_000, help="calls for the cost per call")
    parser.add_argument("--quick", action="store_true", help="smaller workloads, 3 rounds")
    parser.add_argument("--only", choices=["runs", "calls"], help="only the runs or only the cost per call")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds = min(args.rounds, 3)
    figures: dict = {"benchmark": "overhead", "rounds": args.rounds, "workloads": {}}
    with tempfile.TemporaryDirectory(prefix="callid-bench-overhead-") as tmp:
        d = Path(tmp)
        if args.only != "calls":
            for name, (ranks, target) in workloads(args.quick).items():
                times: dict[str, list[tuple[float, float | None]]] = {m: [] for m in MODES}
                for i in range(args.rounds):
                    order = list(MODES)[i % 3:] + list(MODES)[:i % 3]  # no mode always runs first
                    for mode in order:
                        times[mode].append(_one(ranks, target, mode, d / "run"))
                row = _summarise(times)
                figures["workloads"][name] = row
                io = "" if "io_s" not in row else (
                    f"; I/O {row['io_s']['callid']:.3f} s vs {row['io_s']['no-callid']:.3f} s, "
                    f"ratio {row['io_ratio_median']:.3f} ({row['io_ratio_spread']})")
                print(f"{name:<17} wall callid {row['wall_s']['callid']:.2f} s, no-callid "
                      f"{row['wall_s']['no-callid']:.2f} s, off {row['wall_s']['off']:.2f} s; ratio "
                      f"{row['wall_ratio_median']:.3f} ({row['wall_ratio_spread']}), no-callid/off "
                      f"{row['untraced_ratio_median']:.3f}{io}", flush=True)
        if args.only != "runs":
            costs = per_call_costs(args.calls, d)
            figures["per_call"] = {k: round(v, 3) for k, v in costs.items()}
            print(f"per call ({args.calls:,} calls): stamping + logging {costs['stamp_and_log_us']:.2f} µs; "
                  f"MPI_File_get_position untraced {costs['untraced_call_us']:.2f} µs, traced "
                  f"{costs['traced_call_us']:.2f} µs (wrapper {costs['wrapper_us']:.2f} µs)")
    print(json.dumps(figures))
    return 0


def _summarise(times: dict[str, list[tuple[float, float | None]]]) -> dict:
    walls = {m: [t[0] for t in ts] for m, ts in times.items()}
    ratios = [a / b for a, b in zip(walls["callid"], walls["no-callid"])]
    untraced = [a / b for a, b in zip(walls["no-callid"], walls["off"])]
    row = {"wall_s": {m: round(statistics.median(v), 3) for m, v in walls.items()},
           "wall_ratio_median": round(statistics.median(ratios), 3), "wall_ratio_spread": _spread(ratios),
           "untraced_ratio_median": round(statistics.median(untraced), 3)}
    if all(t[1] is not None for ts in times.values() for t in ts):
        io = {m: [t[1] for t in ts] for m, ts in times.items()}
        io_ratios = [a / b for a, b in zip(io["callid"], io["no-callid"])]
        row.update(io_s={m: round(statistics.median(v), 4) for m, v in io.items()},
                   io_ratio_median=round(statistics.median(io_ratios), 3), io_ratio_spread=_spread(io_ratios),
                   io_off_ratio_median=round(statistics.median(
                       [a / b for a, b in zip(io["callid"], io["off"])]), 3))
    return row


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
