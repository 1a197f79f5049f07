"""The diagnosis scored against the truth: plant a cause, run ``callid insights``: does it name it first?

Each cause (a fault planted in the file system or a rank with ``--fault``, or a layout or usage mistake
made through the options, ROMIO's hints file or the program's arguments) is planted in each standard
workload it applies to (the examples mpi-io-test, the collective write, IOR and MACSio, and a replay of a
Darshan log), run as a user runs it (``callid run`` or ``callid replay``, then ``callid merge`` and
``callid insights --json``), and the findings are scored against what was planted:

- ``named``: the first high finding, in the order ``callid insights`` prints them (what went wrong,
  then what the program does, then what it caused on the servers; by code), is one the cause expects,
  naming the right server, rank or file;
- ``named lower``: one the cause expects is there (high, or a warning), but not first;
- ``missed``: none is;
- ``false alarm`` (the clean controls, each workload as it is): a high finding on a run with nothing
  planted; ``clean``: none.

Where Drishti can see a cause (what the program does: its Darshan log holds it), drishti-io runs too, on
the Darshan log the same run would have left (:mod:`bench.run_log`), and is scored alike from the codes it
raised (its ``--csv``), in its order, each at Drishti's fixed level (a WARN code, P09 or P10, is at best
``named lower``, as a callid warning would be); on the controls, a HIGH code is a false alarm.

It prints the table (cause x workload: callid's outcome, and drishti-io's after a slash where it ran), the
runs not named first with the high findings before, and one JSON line.  ``--causes`` and ``--workloads``
pick a part of it (``python -m bench diagnose --causes slow-disk,straggler --workloads collective``);
``--drishti`` names the ``drishti`` command (default: the one on PATH; ``pip install drishti-io``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.command import callid_path, run_command
from bench.run_log import write_run_log
from pipeline.insights import in_order

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SERVERS = 4  # I/O servers of every run
TIMEOUT = 300.0


@dataclass(frozen=True)
class Workload:
    """A standard workload: how many ranks, the program and its arguments (None: a replay of a log)."""

    name: str
    ranks: int
    program: list[str] | None
    collective: bool  # its data calls are collective (a straggler shows there)


WORKLOADS = {w.name: w for w in (
    Workload("mpi-io-test", 4, [str(EXAMPLES / "mpi_io_test.py"), "-b", "1MiB", "-i", "4"], False),
    Workload("collective", 4, [str(EXAMPLES / "collective_write.py"), "--block", "1MiB", "--blocks", "4"],
             True),
    Workload("ior", 4, [str(EXAMPLES / "ior.py"), "-b", "1m", "-t", "1m", "-s", "2", "-c", "-k"], True),
    Workload("macsio", 4, [str(EXAMPLES / "macsio.py"), "--parallel-file-mode", "SIF", "--part-size", "1MiB",
                           "--num-dumps", "2", "--vars-per-part", "2", "--meta-size", "0",
                           "--log-file-name", "", "--timings-file-name", ""], True),
    Workload("replay", 4, None, True),
)}


@dataclass(frozen=True)
class Expect:
    """A finding that names the cause: its code, and what it must name."""

    code: str
    servers: tuple[str, ...] = ()
    ranks: tuple[int, ...] = ()
    part: str | None = None  # S813's part

    def matches(self, f: dict) -> bool:
        return (f["code"] == self.code and set(self.servers) <= set(f["servers"])
                and set(self.ranks) <= set(f["ranks"])
                and (self.part is None or (f.get("numbers") or {}).get("part") == self.part))

    def __str__(self) -> str:
        named = [*self.servers, *(f"rank {r}" for r in self.ranks), *([self.part] if self.part else [])]
        return self.code + (f" ({', '.join(named)})" if named else "")


@dataclass(frozen=True)
class Cause:
    """A cause to plant: the options of ``callid run`` / ``replay`` and the hints (ROMIO's hints file; a
    replay's --hint) that plant it, the program's arguments changed (``args``: the workload's arguments ->
    the planted ones; None: unchanged), the findings that name it, and the workloads it applies to (empty:
    all)."""

    name: str
    kind: str  # fault or mistake
    options: list[str]
    expect: list[Expect]
    hints: dict[str, str] = field(default_factory=dict)
    args: Callable[[Workload, list[str]], list[str]] | None = None
    workloads: tuple[str, ...] = ()
    drishti: tuple[str, ...] = ()  # Drishti's codes that name it (none: its Darshan log does not show it)


def _set(args: list[str], flag: str, value: str) -> list[str]:
    """``args`` with ``flag``'s value replaced (or the flag added)."""
    out = list(args)
    if flag in out:
        out[out.index(flag) + 1] = value
        return out
    return [*out, flag, value]


def _replace(table: dict[str, list[tuple[str, str]]]) -> Callable[[Workload, list[str]], list[str]]:
    def change(w: Workload, args: list[str]) -> list[str]:
        for flag, value in table[w.name]:
            args = _set(args, flag, value)
        return args
    return change


_MISALIGNED = {"mpi-io-test": [("-b", "1000KiB")], "collective": [("--block", "1000KiB")],
               "ior": [("-b", "1000k"), ("-t", "1000k")]}
_SMALL = {"mpi-io-test": [("-b", "4KiB"), ("-i", "300")], "ior": [("-b", "4k"), ("-t", "4k"), ("-s", "300")]}
_EACH_READS_ALL = {"collective": [("--cb-read", "disable")]}  # (every rank reads the whole file itself)
_REWRITES = {"ior": [("-i", "3")]}  # (three repetitions write the same file: each byte three times)
_COLLECTIVE = ("collective", "ior", "macsio", "replay")

CAUSES = [
    Cause("slow-disk", "fault", ["--disk-model", "latency=1ms", "--fault", "io1:disk=slow:20x"],
          [Expect("S813", ("io1",), part="disks")]),
    Cause("slow-link", "fault", ["--fault", "io1:link=slow:20x"], [Expect("S813", ("io1",), part="network")]),
    Cause("paused-server", "fault", ["--fault", "io1:pause=1s"],
          [Expect("S813", ("io1",), part="request handling")]),
    Cause("full-server", "fault", ["--fault", "io1:full=1MiB"], [Expect("S814", ("io1",))]),
    Cause("straggler", "fault", ["--fault", "rank1:straggle=100ms"], [Expect("P716", ranks=(1,))],
          workloads=_COLLECTIVE, drishti=("P19",)),
    Cause("busy-metadata-server", "fault", ["--fault", "meta0:load=200x"], [Expect("S808", ("meta0",))]),
    Cause("file-on-one-server", "mistake", [], [Expect("S801")], hints={"striping_factor": "1"}),
    Cause("misaligned", "mistake", ["--strip-size", "1MiB"], [Expect("P702"), Expect("S802")],
          args=_replace(_MISALIGNED), workloads=tuple(_MISALIGNED), drishti=("P08",)),
    Cause("small-independent-shared", "mistake", [], [Expect("P701"), Expect("P707"), Expect("P711")],
          args=_replace(_SMALL),
          workloads=tuple(_SMALL), drishti=("P05", "P06", "P15", "P16", "M02", "M03")),
    Cause("small-flow-buffers", "mistake", ["--flow-buffer", "4KiB", "--strip-size", "1MiB"],
          [Expect("S804"), Expect("S803")]),
    # (where the ranks' accesses interleave: with one contiguous block each, as in IOR and MACSio here,
    # ROMIO's automatic collective buffering aggregates nothing; a Darshan log records none)
    # (Drishti's M08-M10 compare cb_nodes with the job's nodes from SLURM's sacct: none here)
    # (and too few it does not flag: fewer aggregators than nodes is its M08, at level OK)
    Cause("too-few-aggregators", "mistake", ["--ranks-per-host", "1"], [Expect("P717")],
          hints={"cb_nodes": "1"}, workloads=("collective",)),
    Cause("too-many-aggregators", "mistake", [], [Expect("P717")], hints={"cb_nodes": "4"},
          workloads=("collective",), drishti=("M09",)),
    Cause("redundant-reads", "mistake", [], [Expect("S807"), Expect("P710")], args=_replace(_EACH_READS_ALL),
          workloads=tuple(_EACH_READS_ALL), drishti=("P09",)),
    Cause("redundant-writes", "mistake", [], [Expect("P710")], args=_replace(_REWRITES),
          workloads=tuple(_REWRITES), drishti=("P10",)),
]


def _plant(cause: Cause | None, w: Workload, d: Path) -> tuple[list[str], list[str], dict[str, str]]:
    """The run's options, the program's arguments and the environment of ``w`` with ``cause`` planted
    (None: the control); hints go in a ROMIO hints file in ``d`` (a replay: --hint)."""
    args = list(w.program or [])
    if cause is None:
        return [], args, {}
    options, env = list(cause.options), {}
    if cause.hints and w.program is None:
        options += [x for k, v in cause.hints.items() for x in ("--hint", f"{k}={v}")]
    elif cause.hints:
        (d / "romio-hints").write_text("".join(f"{k} {v}\n" for k, v in cause.hints.items()))
        env["ROMIO_HINTS"] = str(d / "romio-hints")
    return options, cause.args(w, args) if cause.args else args, env


def _run(w: Workload, options: list[str], args: list[str], env: dict[str, str], d: Path, log: Path) -> dict:
    """Run, merge and diagnose; the findings (empty, and why, if a step failed)."""
    callid = callid_path()
    out = d / "out"
    if w.program is None:
        command = [callid, "replay", str(log), "-d", str(out), "--servers", str(SERVERS), *options]
    else:
        command = [callid, "run", "-n", str(w.ranks), "--servers", str(SERVERS), "-d", str(out), *options,
                   *args]
    ran = run_command(command, d, "run", TIMEOUT, env)
    db = out / "merged.duckdb"
    merged = run_command([callid, "merge", str(out / "client.parquet"), str(out / "server.parquet"),
                          "-o", str(db)], d, "merge", TIMEOUT)
    if merged["exit"]:
        return {"error": f"run: {ran['stderr_last']}; merge: {merged['stderr_last']}", "findings": []}
    found = run_command([callid, "insights", str(db), "--json"], d, "insights", TIMEOUT)
    if found["exit"]:
        return {"error": f"insights: {found['stderr_last']}", "findings": []}
    return {"error": None, "run_exit": ran["exit"], "run_said": ran["stderr_last"], "seconds": ran["seconds"],
            "db": db, "findings": in_order(json.loads((d / "insights.out").read_text())["findings"])}


#: what a run can come to
OUTCOMES = ("named", "named lower", "missed", "false alarm", "clean", "error")
#: Drishti's codes at level HIGH (each code has one level: P09, P10, M01, M06, M07 are WARN, the rest OK
#: or INFO)
DRISHTI_HIGH = ("S01", "P05", "P06", "P07", "P08", "P11", "P13", "P15", "P16", "P17", "P18", "P19", "P21",
                "P22", "M02", "M03", "M09")


def run_drishti(drishti: str, db: Path, d: Path) -> dict:
    """drishti-io on the Darshan log of the run merged at ``db``: the codes it raised, in its order (its
    ``--csv``: a column per code, True when raised)."""
    log = d / "run.darshan"
    write_run_log(db, log)
    ran = run_command([drishti, "--csv", "--export_dir", str(d), str(log)], d, "drishti", TIMEOUT)
    table = d / "run.csv"
    if ran["exit"] or not table.is_file():
        return {"error": f"drishti: exit {ran['exit']}: {ran['stderr_last']}", "codes": []}
    header, row = table.read_text().splitlines()[:2]
    raised = [c for c, v in zip(header.split(",")[1:], row.split(",")[1:]) if v == "True"]
    return {"error": None, "codes": raised}


def score_drishti(cause: Cause | None, codes: list[str]) -> tuple[str, list[str]]:
    """drishti-io's outcome, scored as :func:`score` scores callid's, and the HIGH codes before the expected
    one (on a control, or when it is missed: all of them)."""
    return _outcome(cause is None, [c for c in codes if c in DRISHTI_HIGH],
                    [c for c in codes if cause and c in cause.drishti])


def score(cause: Cause | None, findings: list[dict]) -> tuple[str, list[str]]:
    """The outcome of one run (``findings`` in the order callid prints them), and the high findings before
    the expected one (on a control, or when it is missed: all of them)."""
    high = [f for f in findings if f["severity"] == "high"]
    expected = [f for f in findings if cause and f["severity"] in ("high", "warning")
                and any(e.matches(f) for e in cause.expect)]
    outcome, before = _outcome(cause is None, high, expected)
    return outcome, [_said(f) for f in before]


def _outcome(control: bool, high: list, expected: list) -> tuple[str, list]:
    """The outcome from the high items and the expected ones, both in the order they are printed: a control
    with a high item is a false alarm; the first expected item named when it is high and nothing high comes
    before it, named lower when it is there, else missed; and the high items before it (all if none)."""
    if control:
        return ("false alarm" if high else "clean"), high
    if not expected:
        return "missed", high
    before = high[:high.index(expected[0])] if expected[0] in high else high
    return ("named" if expected[0] in high and not before else "named lower"), before


def _said(f: dict) -> str:
    part = (f.get("numbers") or {}).get("part")
    named = ", ".join([*f["servers"][:3], *(f"rank {r}" for r in f["ranks"][:3]), *([part] if part else [])])
    return f["code"] + (f" ({named})" if named else "")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench diagnose", description=__doc__.splitlines()[0])
    parser.add_argument("--causes", help="comma-separated causes (default: all): " +
                        ", ".join(c.name for c in CAUSES))
    parser.add_argument("--workloads", help="comma-separated workloads (default: all): " +
                        ", ".join(WORKLOADS))
    parser.add_argument("--no-controls", action="store_true", help="skip the clean controls")
    parser.add_argument("--drishti", default=shutil.which("drishti"),
                        help="the drishti command of drishti-io (default: the one on PATH; none: not run)")
    opts = parser.parse_args(argv)
    for flag, given, known in (("--causes", opts.causes, [c.name for c in CAUSES]),
                               ("--workloads", opts.workloads, list(WORKLOADS))):
        unknown = [n for n in (given or "").split(",") if n and n not in known]
        if unknown:
            parser.error(f"{flag}: no {unknown[0]!r} (one of {', '.join(known)})")
    opts.drishti = None if opts.drishti == "none" else opts.drishti
    if opts.drishti and not shutil.which(opts.drishti):
        parser.error(f"--drishti: {opts.drishti}: no such command (pip install drishti-io)")
    causes = [c for c in CAUSES if not opts.causes or c.name in opts.causes.split(",")]
    workloads = [w for w in WORKLOADS.values() if not opts.workloads or w.name in opts.workloads.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="callid-bench-diagnose-") as tmp:
        log = Path(tmp) / "app.darshan"
        from bench.darshan_log import synthetic_dxt_log

        synthetic_dxt_log(log, ranks=4, accesses=4, size=1 << 20, collective=True)
        plan = [(None, w) for w in workloads if not opts.no_controls]
        plan += [(c, w) for c in causes for w in workloads if not c.workloads or w.name in c.workloads]
        for i, (cause, w) in enumerate(plan):
            name = cause.name if cause else "control"
            d = Path(tmp) / f"{i:02d}-{name}-{w.name}"
            d.mkdir()
            options, args, env = _plant(cause, w, d)
            print(f"[{i + 1}/{len(plan)}] {name} in {w.name} ...", file=sys.stderr, flush=True)
            result = _run(w, options, args, env, d, log)
            outcome, others = (("error", [result["error"]]) if result["error"]
                               else score(cause, result["findings"]))
            row = {"cause": name, "kind": cause.kind if cause else "control", "workload": w.name,
                   "outcome": outcome, "expected": [str(e) for e in cause.expect] if cause else [],
                   "others": others, "planted": _planted(cause, w, options, args, env),
                   "run_exit": result.get("run_exit"), "run_said": result.get("run_said")}
            if opts.drishti and not result["error"] and (cause is None or cause.drishti):
                found = run_drishti(opts.drishti, result["db"], d)
                row["drishti"], row["drishti_others"] = (("error", [found["error"]]) if found["error"]
                                                         else score_drishti(cause, found["codes"]))
                row["drishti_codes"] = found["codes"]
                row["drishti_expected"] = list(cause.drishti) if cause else []
            rows.append(row)
    _print(rows, [c.name for c in causes], [w.name for w in workloads])
    counts = {k: sum(r["outcome"] == k for r in rows) for k in OUTCOMES}
    ran = [r for r in rows if "drishti" in r]
    drishti = {k: sum(r["drishti"] == k for r in ran) for k in OUTCOMES}
    print(json.dumps({"bench": "diagnose", "runs": len(rows), **counts,
                      "drishti": {"runs": len(ran), **drishti} if opts.drishti else "not run (no drishti)",
                      "target_met": counts["named"] == sum(r["kind"] != "control" for r in rows)
                      and counts["false alarm"] == 0 and counts["error"] == 0, "rows": rows}))
    return 0


def _planted(cause: Cause | None, w: Workload, options: list[str], args: list[str], env: dict) -> list[str]:
    """What was planted, as a user would set it."""
    hints = [f"ROMIO_HINTS: {k} {v}" for k, v in cause.hints.items()] if cause and env else []
    return [*hints, *options, *([] if args == (w.program or []) else args[1:])]


def _print(rows: list[dict], causes: list[str], workloads: list[str]) -> None:
    cell = {(r["cause"], r["workload"]): r["outcome"] + (f" / {r['drishti']}" if "drishti" in r else "")
            for r in rows}
    names = [n for n in ["control", *causes] if any(r["cause"] == n for r in rows)]
    width = max(len(n) for n in names)
    wide = max(12, *(len(v) for v in cell.values()))
    print("callid's outcome / drishti-io's (where its Darshan log shows the cause)\n")
    print(f"{'cause':<{width}}  " + "  ".join(f"{w:<{wide}}" for w in workloads))
    for n in names:
        print(f"{n:<{width}}  " + "  ".join(f"{cell.get((n, w), '-'):<{wide}}" for w in workloads))
    print("\nnot named first (the high findings before it), false alarms:")
    if all(r["outcome"] in ("named", "clean") for r in rows):
        print("  none")
    for r in rows:
        if r["outcome"] not in ("named", "clean"):
            ended = f" (the run exited {r['run_exit']}: {r['run_said']})" if r.get("run_exit") else ""
            print(f"  {r['cause']} in {r['workload']}: {r['outcome']}; expected "
                  f"{' or '.join(r['expected']) or '-'}; high: {', '.join(r['others']) or 'none'}{ended}")
    ran = [r for r in rows if "drishti" in r]
    if ran:
        print("\ndrishti-io: the codes it raised (HIGH ones marked *)")
        for r in ran:
            codes = ", ".join(c + ("*" if c in DRISHTI_HIGH else "") for c in r["drishti_codes"]) or "none"
            print(f"  {r['cause']} in {r['workload']}: {r['drishti']}; expected "
                  f"{' or '.join(r['drishti_expected']) or '-'}; raised: {codes}")
