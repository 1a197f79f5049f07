"""``python -m callid.replay.driver SCHEDULE``: one replayer process, started under mpiexec by
``callid replay`` (the file system from ``CALLID_CONFIG``).

Replayer ``p`` of ``P`` makes the calls of the source ranks ``r`` with ``r % P == p``: epoch by
epoch (``callid.replay.plan``), its ranks' independent calls side by side on its lanes
(``callid.replay.lanes``), each rank's next call when it is due (``asap``: when its previous one
ended; ``original``: at its time in the source, scaled, keeping the rank's gaps), the most overdue
rank first; each call logs its source times and its lag (how long after due it started).  Then,
with the other replayers, the collective call that ends the epoch: two-phase I/O as
``callid.mpiio.collective`` does it, the aggregators (source ranks, each driven by its replayer on a
lane; the job's own, when a Darshan log's DXT_POSIX segments show them) accessing their file domains
in ``cb_buffer_size`` cycles, each request carrying the CallIDs of the calls whose bytes it moves.
No data moves between ranks (a replay has none to exchange), so a collective call logs the
aggregators' ``io`` phases only.  Written bytes are a fixed pattern; read bytes are dropped.
"""

# ruff: noqa: E402  (the stop signals are blocked before MPI starts)
from __future__ import annotations

import contextlib
import functools
import heapq
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from callid.launch import RankState, end_job, fail_rank, marker, watch_signals, write_marker

#: run as a program, the stop signals go to a thread set up before MPI starts its own (callid.launch)
STATE = watch_signals() if __name__ == "__main__" else RankState()

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from mpi4py import MPI

from callid.mpiio.call import CallContext
from callid.mpiio.collective import CbHints, TwoPhase, aggregators, file_domains, overlap
from callid.mpiio.record import Record
from callid.mpiio.simfile import int_hint
from callid.mpiio.sysint import FileAttrs, FsError
from callid.replay.lanes import Lane, Lanes
from callid.replay.plan import OPEN, OPTIONS_KEY, SETUP
from callid_core import clock
from callid_core.choices import Payload
from callid_core.config import CONFIG_ENV, Config
from callid_core.devices import faults_from_json, straggles
from callid_core.evidence import REPLAY_ORIGIN
from server_sim import protocol as P

PROGRESS_EVERY = 0.5  # s between progress files
_IO = {"write": P.IoType.WRITE, "read": P.IoType.READ}


class _Strings:
    """A string column as codes into its distinct values."""

    def __init__(self, column: pa.ChunkedArray) -> None:
        encoded = column.combine_chunks().dictionary_encode()
        self.values = encoded.dictionary.to_pylist()
        self.codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)

    def __getitem__(self, i: int) -> str | None:
        code = self.codes[i]
        return None if code < 0 else self.values[code]


class _Lists:
    """A list column as its flat values and each row's bounds."""

    def __init__(self, column: pa.ChunkedArray) -> None:
        lists = column.combine_chunks()
        self.bounds = lists.offsets.to_numpy()
        self.values = lists.flatten().to_numpy()

    def __getitem__(self, i: int) -> list[int]:
        return self.values[self.bounds[i]:self.bounds[i + 1]].tolist()


class Schedule:
    """The schedule's columns (``callid.replay.plan.SCHEDULE``): numbers as numpy arrays, strings
    and lists as :class:`_Strings` and :class:`_Lists` (no Python object per call)."""

    def __init__(self, table: pa.Table) -> None:
        self.n = table.num_rows
        for name in ("rank", "offset", "length", "t_start", "t_end", "callid", "epoch"):
            setattr(self, name, table[name].to_numpy())
        self.coll_seq = table["coll_seq"].fill_null(-1).to_numpy()
        for name in ("file", "path", "func", "io", "origin", "inferred"):
            setattr(self, name, _Strings(table[name]))
        self.region_offsets = _Lists(table["region_offsets"])
        self.region_lengths = _Lists(table["region_lengths"])


class Replayer:
    """The calls of one replayer process."""

    def __init__(self, schedule: str, config: Config, comm: MPI.Intracomm) -> None:
        table = pq.read_table(schedule)
        self.options = json.loads(table.schema.metadata[OPTIONS_KEY])
        self.comm, self.me, self.procs = comm, comm.Get_rank(), comm.Get_size()
        self.config = config
        self.s = s = Schedule(table)
        self.scale = float(self.options["time_scale"]) if self.options["timing"] == "original" else None
        self.ranks_per_host = int(self.options["ranks_per_host"])
        ranks = np.unique(s.rank)
        self.hosts = -(-len(ranks) // self.ranks_per_host) if self.ranks_per_host else 1
        files = table.group_by(["path", "file"]).aggregate([]).to_pylist()
        self.hints = {f["path"]: {**self.options["file_hints"].get(f["file"], {}), **self.options["hints"]}
                      for f in files}
        # the job's aggregators of a file (a Darshan log's DXT_POSIX), unless --hint cb_nodes says otherwise
        self.job_aggs = {f["path"]: set(self.options.get("file_aggregators", {}).get(f["file"], ()))
                         for f in files if "cb_nodes" not in self.options["hints"]}
        longest = int(s.length.max()) if s.n else 0
        # (payload none: no byte is sent, so untouched zero pages, not memory the size of the longest call)
        self.pattern = (memoryview(bytes(range(256)) * (longest // 256 + 1)) if config.payload == Payload.FULL
                        else memoryview(bytearray(longest)))
        mine = ranks[ranks % self.procs == self.me]
        self.lanes = Lanes(config, self.me, max(1, min(int(self.options["lanes"]), len(mine))))
        self.attrs: dict[str, FileAttrs] = {}
        # per source rank (only the lane running the rank's call changes its entries)
        self.last_end: dict[int, int] = {}  # when its last call ended (clock.now)
        self.last_src_end: dict[int, int] = {}  # when that call ended in the source run
        # a planted fault: how late a straggling source rank comes to each of its calls (ns)
        self.late = {r: round(t * 1e9) for r, t in straggles(faults_from_json(config.faults)).items()}
        self.done = 0
        self._done_lock = threading.Lock()
        self.progress_file = Path(config.trace_dir) / f"progress-{self.me}"
        self.progress_at = 0.0

    def close(self) -> None:
        self.lanes.close()

    # -- the replay ------------------------------------------------------------------
    def run(self) -> None:
        s = self.s
        collective = s.coll_seq >= 0
        n_coll = int(s.coll_seq.max()) + 1 if collective.any() else 0
        coll = np.flatnonzero(collective)
        coll = coll[np.lexsort((s.rank[coll], s.coll_seq[coll]))]  # by call, each in rank order
        coll_at = np.searchsorted(s.coll_seq[coll], np.arange(n_coll + 1))
        mine = np.flatnonzero(~collective & (s.epoch >= 0) & (s.rank % self.procs == self.me))
        mine = mine[np.argsort(s.epoch[mine], kind="stable")]  # by epoch, each by rank then time
        mine_at = np.searchsorted(s.epoch[mine], np.arange(n_coll + 2))
        self._setup(np.flatnonzero(s.epoch == SETUP))
        self.t0 = self.comm.allreduce(clock.now(), op=MPI.MAX)  # (one start for all)
        self.last_end = dict.fromkeys(np.unique(s.rank).tolist(), self.t0)
        for epoch in range(n_coll + 1):
            self._independent(mine[mine_at[epoch]:mine_at[epoch + 1]])
            if epoch < n_coll:
                self._collective(coll[coll_at[epoch]:coll_at[epoch + 1]])
        self._progress(force=True)

    def _record(self, i: int, **fields) -> Record:
        s = self.s
        source = s.origin[i] != REPLAY_ORIGIN
        return Record(callid=int(s.callid[i]), func=s.func[i], file=s.path[i], offset=int(s.offset[i]),
                      size=int(s.length[i]), count=int(s.length[i]), datatype="MPI_BYTE",
                      region_offsets=s.region_offsets[i], region_lengths=s.region_lengths[i],
                      origin=s.origin[i], inferred=s.inferred[i],
                      src_t_start=int(s.t_start[i]) if source else None,
                      src_t_end=int(s.t_end[i]) if source else None, **fields)

    def _setup(self, calls: np.ndarray) -> None:
        """Replayer 0 creates every file (each by the open of its lowest rank) and prefills the
        files read before written; all get the files' layouts."""
        if self.me == 0:
            lane = self.lanes.lanes[0]  # (the lanes' threads are idle)
            for i in calls.tolist():
                if self.s.io[i] != OPEN:
                    self._access(lane, i, None)
                    continue
                lane.as_rank(int(self.s.rank[i]))
                rec = self._record(i, t_start=clock.now(), collective=False)
                rec.offset = rec.size = rec.count = None
                path = self.s.path[i]
                hints = self.hints[path]
                rec.hints = ";".join(f"{k}={v}" for k, v in hints.items()) or None
                try:
                    self.attrs[path] = lane.sysint.create(
                        path, CallContext((rec.callid,), rec.func),
                        dfile_count=int_hint(hints, "striping_factor"),
                        strip_size=int_hint(hints, "striping_unit"))
                except FsError as exc:  # (nothing of the file can be replayed)
                    rec.error = str(exc)
                    raise
                finally:
                    rec.t_end = clock.now()
                    lane.trace.call(rec)
                self._ended(i, None)
        self.attrs = self.comm.bcast(self.attrs, root=0)

    def _independent(self, calls: np.ndarray) -> None:
        """My ranks' calls of one epoch (by rank, each rank's in order): every rank makes its next
        call when it is due, on any lane that is free, the most overdue rank first."""
        if not len(calls):
            return
        ranks = self.s.rank[calls]
        firsts = np.r_[0, np.flatnonzero(ranks[1:] != ranks[:-1]) + 1]
        ends = np.r_[firsts[1:], len(calls)]
        todo = {int(ranks[a]): calls[a:b][::-1].tolist() for a, b in zip(firsts, ends)}  # (popped at the end)
        due = [(self._due(q[-1]), r) for r, q in todo.items()]
        heapq.heapify(due)
        lock = threading.Lock()

        def work(lane: Lane) -> None:
            while True:
                with lock:
                    if not due:
                        return
                    when, rank = heapq.heappop(due)
                queue = todo[rank]  # (this lane's until it gives the rank back)
                while True:
                    self._sleep_until(when)
                    self._access(lane, queue.pop(), when)
                    if not queue:
                        break
                    when = self._due(queue[-1])
                    with lock:
                        if due and due[0][0] < when:  # another rank is more overdue
                            heapq.heappush(due, (when, rank))
                            break

        self.lanes.each(work)

    def _due(self, i: int) -> int:
        """When call ``i`` is due (clock.now): asap, when its rank's previous call ended; original,
        at the replay's start plus its source time (scaled), no sooner than its rank's source gap
        (scaled) after its previous call; a straggling rank's (a planted fault) that much later."""
        rank = int(self.s.rank[i])
        late = self.late.get(rank, 0)  # (a straggling rank: that much later)
        if self.scale is None:
            return self.last_end[rank] + late
        t = int(self.s.t_start[i])
        due = self.t0 + int(t * self.scale)
        if rank in self.last_src_end:
            due = max(due, self.last_end[rank] + int(max(0, t - self.last_src_end[rank]) * self.scale))
        return due + late

    def _sleep_until(self, due: int) -> None:
        if self.scale is not None or self.late:
            delay = (due - clock.now()) / 1e9
            if delay > 0:
                time.sleep(delay)

    def _ended(self, i: int, end: int | None) -> None:
        """Call ``i`` ended (at ``end``, clock.now; None: a call the replay added)."""
        if end is not None:
            rank = int(self.s.rank[i])
            self.last_end[rank] = end
            self.last_src_end[rank] = int(self.s.t_end[i])
        with self._done_lock:
            self.done += 1
            self._progress()

    def _regions(self, i: int) -> list[tuple[int, int]]:
        """The file ranges call ``i`` accesses, in the order of its buffer."""
        s = self.s
        offsets = s.region_offsets[i]
        if offsets:
            return list(zip(offsets, s.region_lengths[i]))
        length = int(s.length[i])
        return [(int(s.offset[i]), length)] if length else []

    def _io(self, lane: Lane, i: int) -> int:
        """Call ``i``'s access, on behalf of its rank; the bytes it moved."""
        s = self.s
        length, io = int(s.length[i]), _IO[s.io[i]]
        lane.as_rank(int(s.rank[i]))
        buf = self.pattern[:length] if io == P.IoType.WRITE else lane.scratch(length)
        return lane.sysint.io(self.attrs[s.path[i]], io, self._regions(i), buf,
                              CallContext((int(s.callid[i]),), s.func[i]))

    def _access(self, lane: Lane, i: int, due: int | None) -> None:
        """One independent call, due at ``due`` (clock.now; None: a call the replay added)."""
        lane.as_rank(int(self.s.rank[i]))
        began = clock.now()
        rec = self._record(i, t_start=began, collective=False, lag=None if due is None else began - due)
        try:
            rec.bytes = self._io(lane, i)
        except FsError as exc:
            rec.bytes, rec.error = 0, str(exc)
        rec.t_end = clock.now()
        lane.trace.call(rec)
        self._ended(i, None if due is None else rec.t_end)

    def _collective(self, calls: np.ndarray) -> None:
        """One collective call of every participant (``calls``, one per rank, in rank order).  Each
        of my ranks enters it when due (or when its previous call ended, if later); it begins when
        the last has entered."""
        s = self.s
        order: list[int] = calls.tolist()
        ranks = s.rank[order].tolist()
        mine = [i for i, r in zip(order, ranks) if r % self.procs == self.me]
        due = {i: self._due(i) for i in mine}
        entered = {i: max(due[i], self.last_end[int(s.rank[i])]) for i in mine}
        self._sleep_until(self.comm.allreduce(max(entered.values(), default=0), op=MPI.MAX))
        errors = self._run_agreed(self._collective_tasks(order, ranks, mine))
        self._log_collective(mine, due, entered, errors)

    def _collective_tasks(self, calls: list[int], ranks: list[int],
                          mine: list[int]) -> list[Callable[[Lane], object]]:
        """The lane tasks of my part of a collective call: my aggregators' domains, or (independent
        access) my ranks' own calls."""
        s = self.s
        path, io = s.path[calls[0]], _IO[s.io[calls[0]]]
        hints = CbHints.from_info(self.hints[path], self.hosts)
        job_aggs = [a for a, r in enumerate(ranks) if r in self.job_aggs.get(path, ())]
        aggs = job_aggs or aggregators(ranks, self.ranks_per_host, hints.cb_nodes)
        regions = {i: self._regions(i) for i in calls}
        ranges = [(r[0][0], max(o + n for o, n in r)) if r else (None, None) for r in regions.values()]
        mode = hints.mode(io)
        if job_aggs and mode == "automatic":  # (the job aggregated, its DXT_POSIX says: whatever the ranges)
            mode = "enable"
        domains = file_domains(ranges, len(aggs), mode)
        if domains is None:  # independent access, each rank its own
            return [functools.partial(self._io, i=i) for i in mine]
        return [functools.partial(self._aggregate, io=io, hints=hints, ranks=ranks, regions=regions,
                                  agg=calls[a], lo=lo, hi=hi)
                for a, (lo, hi) in zip(aggs, domains) if ranks[a] % self.procs == self.me]

    def _run_agreed(self, tasks: list[Callable[[Lane], object]]) -> list[str]:
        """Run ``tasks`` on my lanes; the first error of each replayer that had one (the same on all)."""
        errors: list[str] = []

        def run(lane: Lane, task: Callable[[Lane], object]) -> None:
            try:
                task(lane)
            except FsError as exc:
                errors.append(str(exc))

        self.lanes.map(run, tasks)
        return [e for e in self.comm.allgather(errors[0] if errors else None) if e]

    def _log_collective(self, mine: list[int], due: dict[int, int], entered: dict[int, int],
                        errors: list[str]) -> None:
        """Log my ranks' calls of a collective call that ends now (failed with the first of ``errors``)."""
        s = self.s
        t_end = clock.now()
        lane = self.lanes.lanes[0]  # (the lanes' threads are idle)
        for i in mine:
            lane.as_rank(int(s.rank[i]))
            rec = self._record(i, t_start=entered[i], t_end=t_end, collective=True,
                               coll_seq=int(s.coll_seq[i]), bytes=0 if errors else int(s.length[i]),
                               error=errors[0] if errors else None, lag=entered[i] - due[i])
            lane.trace.call(rec)
            self._ended(i, t_end)

    def _aggregate(self, lane: Lane, *, io: P.IoType, hints: CbHints, ranks: list[int],
                   regions: dict[int, list[tuple[int, int]]], agg: int, lo: int, hi: int) -> None:
        """Aggregator ``agg`` (one of the calls, whose file ranges are ``regions``, in rank order)
        accesses its domain ``[lo, hi)`` for every call."""
        s = self.s
        lane.as_rank(int(s.rank[agg]))
        tp = TwoPhase(lane.sysint, None, self.attrs[s.path[agg]], hints, ranks, self.ranks_per_host)
        mine = CallContext((int(s.callid[agg]),), s.func[agg])
        parts = {i: [(o, n) for o, n, _ in overlap(r, lo, hi)] for i, r in regions.items()}
        if io == P.IoType.WRITE:
            tp.write_domain([(int(s.callid[i]), runs, self.pattern[:sum(n for _, n in runs)])
                             for i, runs in parts.items() if runs], mine)
        else:
            tp.read_domain([(int(s.callid[i]), runs) if runs else None for i, runs in parts.items()], mine)

    def _progress(self, force: bool = False) -> None:
        """Tell ``callid replay`` how many calls are done (a small file, replaced)."""
        now = time.monotonic()
        if force or now - self.progress_at >= PROGRESS_EVERY:
            self.progress_at = now
            tmp = self.progress_file.with_suffix(".tmp")
            tmp.write_text(str(self.done))
            os.replace(tmp, self.progress_file)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    comm = MPI.COMM_WORLD
    config = Config.load(os.environ[CONFIG_ENV])
    clock.use_domain(config.clock_skew, config.clock_t0, "host0")
    replayer = None
    me = comm.Get_rank()
    STATE.rank, STATE.trace_dir = me, config.trace_dir
    write_marker(config.trace_dir, me, "running", str(os.getpid()))
    try:
        replayer = Replayer(args[0], config, comm)
        STATE.flush = replayer.lanes.flush
        replayer.run()
        replayer.close()
    except BaseException as exc:  # a failing replayer stops the others (as callid.launch does)
        fail_rank(config.trace_dir, me, exc, f"replayer {me}: ")  # (one line; the traceback in a file)
        if replayer is not None:
            with contextlib.suppress(Exception):  # (what it can still flush)
                replayer.close()
        marker(config.trace_dir, me, "running").unlink(missing_ok=True)
        end_job(comm, 1)
    marker(config.trace_dir, me, "running").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
