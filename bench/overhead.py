"""Tracing overhead: ``--callid`` against ``--no-callid`` (and tracing off), the cost per call, the C path.

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
the untraced ``MPI.File``).  Then the cost of writing logs by time (a killed process loses
about a second): the largest rewrite of a log's open part, which its timer does at most once
a second.

The C path (a program on the MPI library's own MPI-IO, ROMIO; both programs built with the
``mpich`` wheel's ``mpicc``):

* ``c-calls``: the interposition library's cost per call.  ``bench/c/calls.c`` times, inside
  itself, N calls each of ``MPI_File_get_position``, ``MPI_File_write_at`` of 0 bytes and of 8
  bytes on a local file (in ten slices: the median slice's time per call counts, the mean's is in
  the JSON), under ``mpiexec -n 1`` in three modes, interleaved: ``callid`` (the
  library preloaded, its records directory set: every call stamped and logged), ``preload`` (the
  library preloaded, no directory: it passes the calls through) and ``plain`` (the baseline: no
  preload).  Printed per call: the median over the rounds of traced - plain (the target: at most
  2 µs) and of preload - plain, with their spread.
* ``c-fuse``: the FUSE client's bandwidth: ``examples/c/mpi-io-test.c`` (2 ranks, 1 MiB blocks,
  written then read back) through ``callid run`` (``/pvfs2``, the library preloaded) against the
  same program under plain ``mpiexec`` on a local file (the baseline: its reads come from the page
  cache, its write time includes the program's ``MPI_File_sync`` to the disk); write and read MiB/s
  as it prints them, medians over interleaved rounds, and their ratio (no target yet).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
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


def time_flush_cost(directory: Path, rounds: int = 20) -> dict[str, float]:
    """What writing logs by time costs a process: the timer rewrites the open part of its log once a
    second, at most ``flush_rows`` - 1 rows (a part is sealed at ``flush_rows``).  The median time of
    that largest rewrite (client rows as a rank logs them), and its share of one core."""
    from callid_core import schema as S
    from callid_core.config import DEFAULT_FLUSH_ROWS, DEFAULT_FLUSH_SECONDS
    from callid_core.partlog import PartLog

    row = S.CLIENT.row(callid=1, rank=0, clock="host0", kind="call", func="MPI_File_write_at",
                       file="/pvfs2/f", fid=1, offset=4096, size=4096, count=4096, datatype="MPI_BYTE",
                       bytes=4096, t_start=1, t_end=2)
    times = []
    for i in range(rounds):  # (a flush writes the same rows as the timer's rewrite: the open part's)
        log = PartLog(S.CLIENT_SCHEMA, directory / "timer", f"client-rank{i:06d}", {}, flush_seconds=0)
        for _ in range(DEFAULT_FLUSH_ROWS - 1):
            log.append(row)
        times.append(_timed(log.flush))
    worst = statistics.median(times)
    return {"open_part_rows": DEFAULT_FLUSH_ROWS - 1, "rewrite_ms": worst * 1e3,
            "core_share": worst / DEFAULT_FLUSH_SECONDS}


# --------------------------------------------------------------------------- the C path

C_MODES = ("callid", "preload", "plain")
C_KINDS = {"get_position": "MPI_File_get_position", "write_at_0": "MPI_File_write_at 0 B",
           "write_at_8": "MPI_File_write_at 8 B"}
BLOCK = 1 << 20  # mpi-io-test's block (bytes per call) in the bandwidth runs
TARGET_US = 2.0  # the target for stamping + logging per call


def build_c(source: Path, directory: Path) -> Path:
    """``source`` compiled with the ``mpich`` wheel's ``mpicc`` (``-O2``) into ``directory``."""
    from callid.romio.build import find_mpicc

    exe = directory / source.stem
    done = subprocess.run([find_mpicc(), "-O2", "-Wall", "-o", str(exe), str(source)], capture_output=True,
                          text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"mpicc failed on {source}:\n{done.stderr}")
    return exe


def _plain_env() -> dict[str, str]:
    """This environment without a preload or the library's variables (the mode adds them)."""
    from callid.romio.records import ENV

    return {k: v for k, v in os.environ.items() if k not in ENV.values() and k != "LD_PRELOAD"}


def c_per_call(exe: Path, calls: int, mode: str, directory: Path) -> dict[str, float]:
    """ns per call of each kind (``C_KINDS``: the median slice's; ``KIND_mean``: the mean) of one run of
    ``bench/c/calls.c`` in ``mode``."""
    from callid.romio import build
    from callid.romio.records import ENV, RECORD, rank_files
    from callid.run import find_mpiexec

    records = directory / "records"
    shutil.rmtree(records, ignore_errors=True)
    records.mkdir(parents=True)
    cmd = [find_mpiexec(), "-n", "1"]
    if mode != "plain":
        cmd += ["-genv", "LD_PRELOAD", str(build.library())]
    if mode == "callid":
        cmd += ["-genv", ENV["dir"], str(records)]
    cmd += [str(exe), "-n", str(calls), "-f", str(directory / "calls.dat")]
    os.sync()  # (no write-back of an earlier run's records during this one)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=_plain_env())
    if done.returncode != 0:
        raise RuntimeError(f"{exe.name} ({mode}) failed: {done.stderr.strip()}")
    # the mode did what it says: every call logged, or none
    logged = sum(p.stat().st_size for p in records.glob("*.rec")) // RECORD.itemsize
    expected = 3 * (calls + calls // 100) + 2 if mode == "callid" else 0  # (+ the open and the close)
    if logged != expected or (mode == "callid" and not rank_files(records, 0)[0].exists()):
        raise RuntimeError(f"{exe.name} ({mode}): {logged} records, expected {expected}")
    shutil.rmtree(records, ignore_errors=True)
    (directory / "calls.dat").unlink(missing_ok=True)
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return {name: figures[f"{name}_ns"] for k in C_KINDS for name in (k, f"{k}_mean")}


def c_calls(exe: Path, calls: int, rounds: int, directory: Path) -> dict:
    """``c_per_call`` in the three modes, interleaved with the order rotated; medians and spreads."""
    ns: dict[str, list[dict[str, float]]] = {m: [] for m in C_MODES}
    for i in range(rounds):
        for mode in C_MODES[i % 3:] + C_MODES[:i % 3]:
            ns[mode].append(c_per_call(exe, calls, mode, directory))
    row: dict = {"calls": calls, "rounds": rounds}
    for kind in C_KINDS:
        cost = [(a[kind] - b[kind]) / 1e3 for a, b in zip(ns["callid"], ns["plain"])]
        through = [(a[kind] - b[kind]) / 1e3 for a, b in zip(ns["preload"], ns["plain"])]
        mean = [(a[f"{kind}_mean"] - b[f"{kind}_mean"]) / 1e3 for a, b in zip(ns["callid"], ns["plain"])]
        row[kind] = {f"{m}_us": round(statistics.median(v[kind] for v in ns[m]) / 1e3, 4) for m in C_MODES}
        row[kind].update(cost_us=round(statistics.median(cost), 4), cost_spread=_spread(cost),
                         cost_of_means_us=round(statistics.median(mean), 4),
                         passthrough_us=round(statistics.median(through), 4),
                         passthrough_spread=_spread(through))
    row["max_cost_us"] = max(row[kind]["cost_us"] for kind in C_KINDS)
    row["target_us"] = TARGET_US
    row["target_met"] = row["max_cost_us"] <= TARGET_US
    return row


_BANDWIDTH = re.compile(r"^# (write|read): +[0-9.]+ s, ([0-9.]+) MiB/s$", re.M)


def mpi_io_test(exe: Path, iterations: int, mode: str, directory: Path) -> dict[str, float]:
    """Write and read MiB/s (as the program prints them) of one run of ``examples/c/mpi-io-test.c``
    on 2 ranks: through ``callid run`` on ``/pvfs2`` (``callid``), or plainly on a local file (``local``)."""
    from callid.run import RunOptions, find_mpiexec, run

    args = ["-b", str(BLOCK), "-i", str(iterations)]
    out = directory / "run"
    shutil.rmtree(out, ignore_errors=True)  # every run starts from an empty file system
    os.sync()  # ... and no write-back of an earlier run's dirty pages
    if mode == "callid":
        target = [str(exe), *args, "-f", "/pvfs2/mit"]
        stdout = run(RunOptions(target=target, np=2, out=str(out), capture=True, timeout=600)).stdout
    else:
        out.mkdir(parents=True)
        done = subprocess.run([find_mpiexec(), "-n", "2", str(exe), *args, "-f", str(out / "mit")],
                              capture_output=True, text=True, timeout=600, env=_plain_env())
        if done.returncode != 0:
            raise RuntimeError(f"{exe.name} ({mode}) failed: {done.stderr.strip()}")
        stdout = done.stdout
    shutil.rmtree(out, ignore_errors=True)
    if "# data check: passed" not in stdout:
        raise RuntimeError(f"{exe.name} ({mode}): data check failed or missing:\n{stdout}")
    return {name: float(mib) for name, mib in _BANDWIDTH.findall(stdout)}


def c_fuse(exe: Path, iterations: int, rounds: int, directory: Path) -> dict:
    """``mpi_io_test`` through callid run and locally, interleaved; medians, ratios and spreads."""
    modes = ("callid", "local")
    mib: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    for i in range(rounds):
        for mode in modes[i % 2:] + modes[:i % 2]:
            mib[mode].append(mpi_io_test(exe, iterations, mode, directory))
    row: dict = {"ranks": 2, "block": BLOCK, "iterations": iterations, "rounds": rounds}
    for op in ("write", "read"):
        ratios = [a[op] / b[op] for a, b in zip(mib["callid"], mib["local"])]
        row[f"{op}_mib_s"] = {m: round(statistics.median(v[op] for v in mib[m]), 1) for m in modes}
        row[f"{op}_ratio_median"] = round(statistics.median(ratios), 4)
        row[f"{op}_ratio_spread"] = f"{min(ratios):.4f}-{max(ratios):.4f}"
    return row


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _spread(values: list[float]) -> str:
    return f"{min(values):.3f}-{max(values):.3f}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench overhead", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="rounds of callid / no-callid / off runs "
                        "(and of the C path's modes)")
    parser.add_argument("--calls", type=int, default=100_000, help="calls for the cost per call")
    parser.add_argument("--c-calls", type=int, help="calls of each kind in bench/c/calls.c (default "
                        "1,000,000; --quick: 100,000)")
    parser.add_argument("--c-iterations", type=int, help="1 MiB blocks per rank of the C mpi-io-test "
                        "(default 512; --quick: 64)")
    parser.add_argument("--quick", action="store_true", help="smaller workloads, 3 rounds")
    parser.add_argument("--only", choices=["runs", "calls", "c", "c-calls", "c-fuse"],
                        help="only the Python runs, the Python cost per call, the C path (both parts), the "
                        "C cost per call or the C FUSE client's bandwidth")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds = min(args.rounds, 3)
    c_calls_n = args.c_calls or (100_000 if args.quick else 1_000_000)
    c_iterations = args.c_iterations or (64 if args.quick else 512)
    parts = {"runs", "calls", "c-calls", "c-fuse"} if args.only is None else \
        {"c-calls", "c-fuse"} if args.only == "c" else {args.only}
    figures: dict = {"benchmark": "overhead", "rounds": args.rounds, "workloads": {}}
    with tempfile.TemporaryDirectory(prefix="callid-bench-overhead-") as tmp:
        d = Path(tmp)
        exes = {}
        if parts & {"c-calls", "c-fuse"}:  # built first: a missing compiler fails before the long runs
            from callid.romio.build import library

            library()
            (d / "c").mkdir()
            exes = {"calls": build_c(ROOT / "bench" / "c" / "calls.c", d / "c"),
                    "mpi-io-test": build_c(ROOT / "examples" / "c" / "mpi-io-test.c", d / "c")}
        if "c-fuse" in parts:
            from callid.romio.launch import fuse_missing

            if fuse_missing():
                raise SystemExit(f"the C path's bandwidth runs need FUSE: {fuse_missing()} (--only runs, "
                                 "calls or c-calls go without)")
        if "runs" in parts:
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
        if "calls" in parts:
            costs = per_call_costs(args.calls, d)
            figures["per_call"] = {k: round(v, 3) for k, v in costs.items()}
            print(f"per call ({args.calls:,} calls): stamping + logging {costs['stamp_and_log_us']:.2f} µs; "
                  f"MPI_File_get_position untraced {costs['untraced_call_us']:.2f} µs, traced "
                  f"{costs['traced_call_us']:.2f} µs (wrapper {costs['wrapper_us']:.2f} µs)", flush=True)
            timer = time_flush_cost(d)
            figures["time_flush"] = {k: round(v, 5) for k, v in timer.items()}
            print(f"logs written by time: the largest rewrite of an open part ({timer['open_part_rows']:,} "
                  f"rows) {timer['rewrite_ms']:.2f} ms, once a second: {100 * timer['core_share']:.2f}% of "
                  "a core at most", flush=True)
        if "c-calls" in parts:
            figures["c_per_call"] = _print_c_calls(c_calls(exes["calls"], c_calls_n, args.rounds, d / "c"))
        if "c-fuse" in parts:
            figures["c_fuse"] = _print_c_fuse(c_fuse(exes["mpi-io-test"], c_iterations, args.rounds, d / "c"))
    print(json.dumps(figures))
    return 0


def _print_c_calls(row: dict) -> dict:
    print(f"C per call ({row['calls']:,} calls of each, {row['rounds']} rounds; traced - plain, the target "
          f"at most {TARGET_US:g} µs: {'met' if row['target_met'] else 'NOT met'}):", flush=True)
    for kind, label in C_KINDS.items():
        k = row[kind]
        print(f"  {label:<24} plain {k['plain_us']:.3f} µs, traced {k['callid_us']:.3f} µs: "
              f"+{k['cost_us']:.3f} µs ({k['cost_spread']}); preloaded, not traced "
              f"{k['passthrough_us']:+.3f} µs ({k['passthrough_spread']})", flush=True)
    return row


def _print_c_fuse(row: dict) -> dict:
    w, r = row["write_mib_s"], row["read_mib_s"]
    print(f"C mpi-io-test 1MiB (2 ranks, {row['iterations']} iterations, {row['rounds']} rounds): callid run "
          f"/pvfs2 write {w['callid']:.1f} MiB/s, read {r['callid']:.1f} MiB/s; local file write "
          f"{w['local']:.1f} MiB/s, read {r['local']:.1f} MiB/s; ratio write {row['write_ratio_median']:.4f} "
          f"({row['write_ratio_spread']}), read {row['read_ratio_median']:.4f} ({row['read_ratio_spread']})",
          flush=True)
    return row


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
