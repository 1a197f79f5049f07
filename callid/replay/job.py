"""``callid replay``: read the source, plan the calls, run the replayers on a fresh file system."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from callid.replay.darshan import read_log
from callid.replay.plan import OPTIONS_KEY, make_plan, select
from callid.run import RunOptions, RunResult, run
from callid_core import config as defaults
from callid_core.atomic import replacing
from callid_core.choices import Timing
from callid_core.ids import DEFAULT_LAYOUT, Layout

__all__ = ["ReplayOptions", "ReplayResult", "replay"]


@dataclass
class ReplayOptions:
    """The parameters of ``callid replay``."""

    source: str  # a Darshan log with DXT traces
    out: str = "callid-replay"
    procs: int = 2  # replayer processes (each drives the source ranks r with r % procs == its number)
    timing: Timing = Timing.ASAP
    time_scale: float = 1.0  # original timing: the source's times multiplied by this
    ranks: set[int] | None = None
    files: list[str] = field(default_factory=list)  # fnmatch patterns of the source's file names
    window: tuple[float, float] | None = None  # ns from the source run's start
    hints: dict[str, str] = field(default_factory=dict)  # MPI_Info hints of every file
    servers: int = defaults.DEFAULT_IO_SERVERS
    strip_size: int = defaults.DEFAULT_STRIP_SIZE
    flow_buffer: int = defaults.DEFAULT_FLOW_BUFFER
    small_io: int = defaults.DEFAULT_SMALL_IO
    callid_layout: str = str(DEFAULT_LAYOUT)
    mount: str = defaults.DEFAULT_MOUNT
    ranks_per_host: int | None = None  # None: from the source's host names
    timeout: float | None = None
    on_progress: Callable[[int, int], None] | None = None  # (calls done, calls in all)


@dataclass
class ReplayResult:
    run: RunResult
    calls: int  # calls replayed (the opens included)
    collectives: int  # collective calls (each made by several ranks)
    ranks: int
    files: int
    procs: int
    ranks_per_host: int
    segments: dict[str, int]  # per DXT module: segments in the log
    notes: list[str]  # what was inferred, and where


def replay(opts: ReplayOptions) -> ReplayResult:
    """Replay ``opts.source``; raise ``InputError`` for a bad source, ``RunError`` for a failed run."""
    log = read_log(opts.source)
    accesses = select(log.accesses, opts.ranks, opts.files, opts.window)
    plan = make_plan(accesses, Layout.parse(opts.callid_layout), os.path.abspath(opts.mount))
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    rph = log.ranks_per_host() if opts.ranks_per_host is None else opts.ranks_per_host
    options = {"timing": Timing(opts.timing).value, "time_scale": opts.time_scale, "hints": opts.hints,
               "ranks_per_host": rph}
    schedule = out / "schedule.parquet"
    with replacing(schedule) as tmp:
        pq.write_table(plan.calls.replace_schema_metadata({OPTIONS_KEY: json.dumps(options).encode()}), tmp)
    procs = max(1, min(opts.procs, plan.ranks))
    modules = ", ".join(f"{n} {m} segments" for m, n in log.segments.items() if n)
    source = (f"darshan {os.path.abspath(opts.source)} ({log.nprocs} ranks, {modules}; "
              f"{plan.calls.num_rows} calls replayed, {plan.collectives} collective)")
    parts = out / "parts"
    total = plan.calls.num_rows

    def progress() -> None:
        if opts.on_progress is not None:
            done = sum(_read_int(p) for p in parts.glob("progress-*") if p.suffix != ".tmp")
            opts.on_progress(done, total)

    result = run(RunOptions(
        target=[str(schedule.resolve())], np=procs, launcher="callid.replay.driver", servers=opts.servers,
        strip_size=opts.strip_size, flow_buffer=opts.flow_buffer, small_io=opts.small_io,
        callid_layout=opts.callid_layout, mount=[opts.mount], ranks_per_host=rph, out=str(out),
        timeout=opts.timeout, stdout_to_stderr=True, source=source, on_wait=progress))
    progress()
    return ReplayResult(result, total, plan.collectives, plan.ranks, plan.files, procs, rph,
                        dict(log.segments), list(log.notes))


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text() or 0)
    except (OSError, ValueError):
        return 0
