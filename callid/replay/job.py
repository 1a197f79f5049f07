"""``callid replay``: read the source, plan the calls, run the replayers on a fresh file system."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from callid.mpiio.collective import CB_MODES
from callid.replay.darshan import POSIX, read_log
from callid.replay.layers import links
from callid.replay.plan import OPTIONS_KEY, make_plan, select, stored_bytes
from callid.replay.runlog import is_parquet, read_run_log
from callid.run import RunOptions, RunResult, check_devices, run
from callid_core import config as defaults
from callid_core import schema as S
from callid_core.atomic import replacing
from callid_core.choices import Payload, Timing
from callid_core.clock import domain_name
from callid_core.devices import parse_faults, straggles
from callid_core.errors import BadValue, Failed, os_reason
from callid_core.evidence import REPLAY_ORIGIN
from callid_core.ids import DEFAULT_LAYOUT, Layout
from callid_core.units import RankSet, human_size
from pipeline.load import validate_log

__all__ = ["ReplayOptions", "ReplayResult", "replay"]

#: bytes a replay with data leaves free beside the data it stores (for its logs and the merge)
LOG_RESERVE = 64 << 20


@dataclass
class ReplayOptions:
    """The parameters of ``callid replay``."""

    source: str  # a Darshan log with DXT traces, or the client log of a traced run
    out: str = "callid-replay"
    procs: int = 2  # replayer processes (each drives the source ranks r with r % procs == its number)
    lanes: int = 0  # calls in flight per replayer (callid.replay.lanes); 0: config.MAX_REPLAY_LANES at most
    timing: Timing = Timing.ASAP
    time_scale: float = 1.0  # original timing: the source's times multiplied by this
    ranks: RankSet | None = None
    files: list[str] = field(default_factory=list)  # fnmatch patterns of the source's file names
    window: tuple[float, float] | None = None  # ns from the source run's start
    hints: dict[str, str] = field(default_factory=dict)  # MPI_Info hints of every file
    # The file system; None: the traced run's (a client log), else the defaults of callid run
    servers: int | None = None
    strip_size: int | None = None
    flow_buffer: int | None = None
    small_io: int | None = None
    callid_layout: str | None = None
    ranks_per_host: int | None = None  # None: the run's, or from a Darshan log's host names
    mount: str = defaults.DEFAULT_MOUNT
    prefill: bool = True  # write the files read before written first (callid.replay.plan)
    payload: Payload = Payload.FULL  # NONE: no data moves or is stored (sizes only)
    timeout: float | None = None
    disk_model: str = ""  # the servers' disks and links and faults planted (callid.run.RunOptions)
    net_model: str = ""
    faults: list[str] = field(default_factory=list)
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


def _whole(lo: int, hi: int) -> Callable[[str], bool]:
    return lambda v: v.isdigit() and lo <= int(v) <= hi


#: the hints a replay honours (``--hint``), and the values each takes
REPLAY_HINTS: dict[str, tuple[Callable[[str], bool], str]] = {
    "cb_nodes": (_whole(1, 1 << 31), "a number of aggregators, at least 1"),
    "cb_buffer_size": (_whole(1, 1 << 40), "bytes, at least 1"),
    **{key: (CB_MODES.__contains__, "one of " + ", ".join(CB_MODES))
       for key in ("romio_cb_write", "romio_cb_read")},
    "striping_factor": (_whole(1, defaults.MAX_IO_SERVERS), "a number of servers, at least 1"),
    "striping_unit": (_whole(defaults.MIN_STRIP_SIZE, defaults.MAX_STRIP_SIZE),
                      f"bytes, {defaults.MIN_STRIP_SIZE} to {defaults.MAX_STRIP_SIZE}"),
}


def check_hints(hints: dict[str, str]) -> None:
    """:class:`BadValue` for a hint a replay does not honour, or a value it cannot take."""
    for key, value in hints.items():
        if key not in REPLAY_HINTS:
            raise BadValue(f"--hint {key}: not a hint a replay honours ({', '.join(REPLAY_HINTS)})")
        valid, what = REPLAY_HINTS[key]
        if not valid(value):
            raise BadValue(f"--hint {key}={value}: {what}")


def replay(opts: ReplayOptions) -> ReplayResult:
    """Replay ``opts.source``; raise ``InputError`` for a bad source, ``RunError`` for a failed run."""
    check_hints(opts.hints)
    if not 0 < opts.time_scale < float("inf"):
        raise BadValue(f"--time-scale: {opts.time_scale} is not a factor above 0")
    source = _read_source(opts.source)
    was = source.config
    io_servers = [s for s in was.get("servers", []) if defaults.ROLE_IO in s.get("roles", ())]
    servers = _pick(opts.servers, len(io_servers) or None, defaults.DEFAULT_IO_SERVERS)
    check_devices(opts, servers, None)  # (before anything is written; the ranks once planned)
    layout = opts.callid_layout or was.get("callid_layout") or str(DEFAULT_LAYOUT)
    accesses = select(source.accesses, opts.ranks, opts.files, opts.window)
    plan = make_plan(accesses, Layout.parse(layout), os.path.abspath(opts.mount), opts.prefill)
    missing = set(straggles(parse_faults(opts.faults))) - set(pc.unique(plan.calls["rank"]).to_pylist())
    if missing:
        raise BadValue(f"--fault: rank {min(missing)} makes no call in the replay (rankN: a source rank)")
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    if opts.payload == Payload.FULL:
        _check_space(plan.calls, out)
    rph = _pick(opts.ranks_per_host, was.get("ranks_per_host"), source.ranks_per_host)
    procs = max(1, min(opts.procs, plan.ranks))
    options = {"timing": Timing(opts.timing).value, "time_scale": opts.time_scale, "hints": opts.hints,
               "file_hints": source.file_hints, "file_aggregators": source.aggregators, "ranks_per_host": rph,
               "lanes": _lanes(opts.lanes, procs)}
    schedule = out / "schedule.parquet"
    try:
        with replacing(schedule) as tmp:
            pq.write_table(plan.calls.replace_schema_metadata({OPTIONS_KEY: json.dumps(options).encode()}),
                           tmp)
    except OSError as exc:  # (pyarrow's errors name no file)
        raise Failed(f"{schedule}: cannot write the replay's schedule ({os_reason(exc)})") from None
    parts = out / "parts"
    total = plan.calls.num_rows

    def progress() -> None:
        if opts.on_progress is not None:
            done = sum(_read_int(p) for p in parts.glob("progress-*") if p.suffix != ".tmp")
            opts.on_progress(done, total)

    result = run(RunOptions(
        target=[str(schedule.resolve())], np=procs, launcher="callid.replay.driver",
        servers=servers,
        strip_size=_pick(opts.strip_size, was.get("strip_size"), defaults.DEFAULT_STRIP_SIZE),
        flow_buffer=_pick(opts.flow_buffer, was.get("flow_buffer"), defaults.DEFAULT_FLOW_BUFFER),
        small_io=_pick(opts.small_io, was.get("small_io"), defaults.DEFAULT_SMALL_IO),
        callid_layout=layout, mount=[opts.mount], ranks_per_host=rph, out=str(out), timeout=opts.timeout,
        payload=opts.payload, disk_model=opts.disk_model, net_model=opts.net_model, faults=list(opts.faults),
        stdout_to_stderr=True, on_wait=progress,
        source=f"{source.description}; {total} calls replayed, {plan.collectives} collective",
        source_notes=list(source.notes), source_job=source.job,
        source_rows=_cross_layer(plan.calls, source.posix)))
    progress()
    return ReplayResult(result, total, plan.collectives, plan.ranks, plan.files, procs, rph,
                        dict(source.segments), list(source.notes) + _failed(result.client))


def _cross_layer(calls: pa.Table, posix: pa.Table | None) -> pa.Table | None:
    """The client-log rows (kind 'source') of the replay's cross-layer arrows: each POSIX segment of the
    job and the replayed MPI-IO calls it served (callid.replay.layers)."""
    if posix is None:
        return None
    acc = calls.filter(pc.not_equal(calls["origin"], REPLAY_ORIGIN))
    found = links(acc, posix)
    n = found.num_rows
    call = acc.take(found["row"])
    now = pa.repeat(pa.scalar(time.time_ns(), pa.int64()), n)  # (when the replay logged them: its start)
    return S.CLIENT.arrow(n, {
        "callid": call["callid"], "rank": found["rank"], "clock": pa.repeat(domain_name("host", "0"), n),
        "kind": pa.repeat("source", n), "func": call["io"], "file": call["path"], "offset": found["offset"],
        "size": found["length"], "bytes": found["bytes"], "t_start": now, "t_end": now,
        "src_t_start": found["t_start"], "src_t_end": found["t_end"], "origin": pa.repeat(POSIX, n),
        "inferred": pc.if_else(found["exact"], "link", "link,ambiguous")})


def _failed(client: Path) -> list[str]:
    """A note on the replayed calls that failed on the file system (none: no note)."""
    calls = pq.read_table(client, columns=["kind", "error"], filters=[("kind", "=", "call")])
    errors = calls["error"].drop_null()
    if not len(errors):
        return []
    return [f"{len(errors)} of {calls.num_rows} replayed calls failed on the file system (e.g. {errors[0]}): "
            "what follows from them is not the source's I/O"]


@dataclass
class _Source:
    """What any source gives a replay."""

    accesses: pa.Table
    description: str  # for the run table's client.source
    config: dict = field(default_factory=dict)  # a traced run's configuration
    file_hints: dict[str, dict[str, str]] = field(default_factory=dict)
    ranks_per_host: int = 0
    segments: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    job: dict[str, str] = field(default_factory=dict)  # callid.replay.darshan.DarshanLog.job
    aggregators: dict[str, list[int]] = field(default_factory=dict)  # per file: the job's aggregator ranks
    posix: pa.Table | None = None  # the POSIX segments under the MPI-IO calls (callid.replay.darshan)


def _read_source(path: str) -> _Source:
    """A traced run's client log (a Parquet file) or a Darshan log."""
    if is_parquet(path):
        log = read_run_log(path, validate_log(path, S.KIND_CLIENT).config)
        notes = [f"{log.skipped} failed calls left out"] if log.skipped else []
        if log.unplaced:
            notes.append(f"{log.unplaced} calls left out: their offsets are not in the log (a shared file "
                         "pointer's, on the MPI library)")
        return _Source(log.accesses, f"callid {os.path.abspath(path)} ({log.ranks} ranks)", log.config,
                       log.file_hints, notes=notes)
    dxt = read_log(path)
    modules = ", ".join(f"{n} {m} segments" for m, n in dxt.segments.items() if n)
    return _Source(dxt.accesses, f"darshan {os.path.abspath(path)} ({dxt.nprocs} ranks, {modules})",
                   ranks_per_host=dxt.ranks_per_host(), segments=dxt.segments, notes=dxt.notes, job=dxt.job,
                   file_hints=dxt.file_hints, aggregators=dxt.aggregators, posix=dxt.posix)


def _check_space(calls: pa.Table, out: Path) -> None:
    """Refuse (:class:`Failed`) a replay whose data, and ``LOG_RESERVE`` beside, would not fit the free
    space of the file system holding ``out`` (where its servers store their datafiles)."""
    disk = os.statvfs(out)
    need, free = stored_bytes(calls, disk.f_frsize), disk.f_bavail * disk.f_frsize
    if need + LOG_RESERVE > free:
        raise Failed(f"the replay would store {_bytes(need)} (its writes, prefill included) and "
                     f"{_bytes(LOG_RESERVE)} of logs in {out}, whose file system has {_bytes(free)} free: "
                     "replay without storing data (--payload none), or a part of the log (--files, "
                     "--ranks, --window), or elsewhere (-d)")


def _bytes(n: int) -> str:
    return f"{n:,} bytes ({human_size(n)})"


def _lanes(given: int, procs: int) -> int:
    """Lanes per replayer: ``given`` (0: MAX_REPLAY_LANES), within the connections a server takes
    (each lane of each replayer holds one to every server)."""
    room = max(1, defaults.DEFAULT_MAX_CONNECTIONS // procs)
    if given > room:
        raise BadValue(f"--lanes {given}: {procs} replayers of {given} lanes need more connections to each "
                       f"server than it takes ({defaults.DEFAULT_MAX_CONNECTIONS}); at most {room}")
    return given or min(defaults.MAX_REPLAY_LANES, room)


def _pick(given: int | None, was: int | None, default: int) -> int:
    """The option given, else the traced run's value, else the default."""
    return given if given is not None else was if was is not None else default


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text() or 0)
    except (OSError, ValueError):
        return 0
