"""``python -m callid.replay.driver SCHEDULE``: one replayer process, started under mpiexec by
``callid replay`` (the file system from ``CALLID_CONFIG``).

Replayer ``p`` of ``P`` makes the calls of the source ranks ``r`` with ``r % P == p``: epoch by
epoch (``callid.replay.plan``), its ranks' independent calls in order of their time in the source
run (``asap``) or at that time, keeping each rank's gaps (``original``, scaled); then, with the
other replayers, the collective call that ends the epoch.  A collective call is two-phase I/O as
``callid.mpiio.collective`` does it: the aggregators (source ranks, each driven by its replayer)
access their file domains in ``cb_buffer_size`` cycles, each request carrying the CallIDs of the
calls whose bytes it moves.  No data moves between ranks (a replay has none to exchange), so a
collective call logs the aggregators' ``io`` phases only.  Written bytes are a fixed pattern; read
bytes are dropped.
"""

# ruff: noqa: E402  (the stop signals are blocked before MPI starts)
from __future__ import annotations

import heapq
import json
import os
import sys
import time
import traceback
from collections import defaultdict
from pathlib import Path

from callid.launch import RankState, end_job, marker, watch_signals, write_marker

#: run as a program, the stop signals go to a thread set up before MPI starts its own (callid.launch)
STATE = watch_signals() if __name__ == "__main__" else RankState()

import pyarrow.parquet as pq
from mpi4py import MPI

from callid.mpiio.call import CallContext
from callid.mpiio.collective import CbHints, TwoPhase, file_domains, overlap
from callid.mpiio.record import Record
from callid.mpiio.simfile import int_hint
from callid.mpiio.sysint import FileAttrs, FsError, SysInt
from callid.replay.plan import OPEN, OPTIONS_KEY, SETUP
from callid.trace import ClientTrace
from callid_core import clock
from callid_core.config import CONFIG_ENV, Config
from server_sim import protocol as P

PROGRESS_EVERY = 0.5  # s between progress files
_IO = {"write": P.IoType.WRITE, "read": P.IoType.READ}


class Replayer:
    """The calls of one replayer process."""

    def __init__(self, schedule: str, config: Config, comm: MPI.Intracomm) -> None:
        table = pq.read_table(schedule)
        self.options = json.loads(table.schema.metadata[OPTIONS_KEY])
        self.comm, self.me, self.procs = comm, comm.Get_rank(), comm.Get_size()
        self.config = config
        self.rows = table.to_pydict()
        self.n = table.num_rows
        self.trace = ClientTrace(config.trace_dir, self.me, config.callid_layout, config.run_id,
                                 config.to_json(), clock="host0", flush_rows=config.flush_rows)
        self.sysint = SysInt(config, self.me, self.trace.rpc, self.trace.phase)
        self.attrs: dict[str, FileAttrs] = {}
        self.scale = float(self.options["time_scale"]) if self.options["timing"] == "original" else None
        self.ranks_per_host = int(self.options["ranks_per_host"])
        nranks = len(set(self.rows["rank"]))
        self.hosts = -(-nranks // self.ranks_per_host) if self.ranks_per_host else 1
        self.hints = {path: {**self.options["file_hints"].get(name, {}), **self.options["hints"]}
                      for name, path in set(zip(self.rows["file"], self.rows["path"]))}
        longest = max(self.rows["length"], default=0)
        self.pattern = memoryview(bytes(range(256)) * (longest // 256 + 1))
        self.scratch = memoryview(bytearray(longest))
        self.last_end: dict[int, int] = {}  # rank -> when its last call ended (clock.now)
        self.last_orig_end: dict[int, int] = {}  # rank -> when it ended in the source run
        self.last_end_mono: dict[int, int] = {}  # rank -> when its last call ended (monotonic)
        self.done = 0
        self.progress_file = Path(config.trace_dir) / f"progress-{self.me}"
        self.progress_at = 0.0

    def close(self) -> None:
        self.sysint.close()
        self.trace.close()

    # -- the replay ------------------------------------------------------------------
    def run(self) -> None:
        rows = self.rows
        mine: dict[int, list[int]] = defaultdict(list)  # epoch -> my independent calls
        colls: dict[int, list[int]] = defaultdict(list)  # coll_seq -> every participant's call
        setup = []
        for i in range(self.n):
            if rows["epoch"][i] == SETUP:
                setup.append(i)
            elif rows["coll_seq"][i] is not None:
                colls[rows["coll_seq"][i]].append(i)
            elif rows["rank"][i] % self.procs == self.me:
                mine[rows["epoch"][i]].append(i)
        self._setup(setup)
        self.t0 = time.monotonic_ns()
        start = clock.now()
        self.last_end = {r: start for r in set(rows["rank"])}
        for epoch in range(len(colls) + 1):
            self._independent(mine.get(epoch, []))
            if epoch < len(colls):
                self._collective(colls[epoch])
        self._progress(force=True)

    def _as(self, rank: int) -> None:
        """Log and send what follows on behalf of source rank ``rank``."""
        self.trace.rank = self.sysint.rank = rank

    def _record(self, i: int, **fields) -> Record:
        rows = self.rows
        return Record(callid=rows["callid"][i], func=rows["func"][i], file=rows["path"][i],
                      offset=rows["offset"][i], size=rows["length"][i], count=rows["length"][i],
                      datatype="MPI_BYTE", region_offsets=rows["region_offsets"][i],
                      region_lengths=rows["region_lengths"][i], origin=rows["origin"][i],
                      inferred=rows["inferred"][i], **fields)

    def _setup(self, calls: list[int]) -> None:
        """Replayer 0 creates every file (each by the open of its lowest rank) and prefills the
        files read before written; all get the files' layouts."""
        if self.me == 0:
            for i in calls:
                if self.rows["io"][i] != OPEN:
                    self._access(i)
                    continue
                self._as(self.rows["rank"][i])
                rec = self._record(i, t_start=clock.now(), collective=False)
                rec.offset = rec.size = rec.count = None
                path = self.rows["path"][i]
                hints = self.hints[path]
                rec.hints = ";".join(f"{k}={v}" for k, v in hints.items()) or None
                try:
                    self.attrs[path] = self.sysint.create(
                        path, CallContext((rec.callid,), rec.func),
                        dfile_count=int_hint(hints, "striping_factor"),
                        strip_size=int_hint(hints, "striping_unit"))
                except FsError as exc:  # (nothing of the file can be replayed)
                    rec.error = str(exc)
                    raise
                finally:
                    rec.t_end = clock.now()
                    self.trace.call(rec)
                self.done += 1
        self.attrs = self.comm.bcast(self.attrs, root=0)

    def _independent(self, calls: list[int]) -> None:
        """My ranks' calls of one epoch, each rank's in its order, the ranks interleaved by time."""
        rows = self.rows
        queues: dict[int, list[int]] = defaultdict(list)
        for i in calls:
            queues[rows["rank"][i]].append(i)
        for q in queues.values():
            q.reverse()  # (popped from the end)
        heap = [(self._due(q[-1]), r) for r, q in queues.items()]
        heapq.heapify(heap)
        while heap:
            due, rank = heapq.heappop(heap)
            self._wait_until(due)
            i = queues[rank].pop()
            self._access(i)
            if queues[rank]:
                heapq.heappush(heap, (self._due(queues[rank][-1]), rank))

    def _due(self, i: int) -> int:
        """When call ``i`` starts: its time in the source run (asap: only the order), or in
        ``original`` timing the replay's start plus that time, no sooner than the rank's gap after
        its last call."""
        t = self.rows["t_start"][i]
        if self.scale is None:
            return t
        rank = self.rows["rank"][i]
        due = self.t0 + int(t * self.scale)
        if rank in self.last_orig_end:
            gap = max(0, t - self.last_orig_end[rank])
            due = max(due, self.last_end_mono[rank] + int(gap * self.scale))
        return due

    def _wait_until(self, due: int) -> None:
        if self.scale is not None:
            delay = (due - time.monotonic_ns()) / 1e9
            if delay > 0:
                time.sleep(delay)

    def _ended(self, i: int) -> None:
        rank = self.rows["rank"][i]
        self.last_end[rank] = clock.now()
        self.last_orig_end[rank] = self.rows["t_end"][i]
        self.last_end_mono[rank] = time.monotonic_ns()
        self.done += 1
        self._progress()

    def _regions(self, i: int) -> list[tuple[int, int]]:
        """The file ranges call ``i`` accesses, in the order of its buffer."""
        rows = self.rows
        if rows["region_offsets"][i]:
            return list(zip(rows["region_offsets"][i], rows["region_lengths"][i]))
        return [(rows["offset"][i], rows["length"][i])] if rows["length"][i] else []

    def _io(self, i: int) -> int:
        """Call ``i``'s access, on behalf of its rank; the bytes it moved."""
        rows = self.rows
        length, io = rows["length"][i], _IO[rows["io"][i]]
        self._as(rows["rank"][i])
        buf = self.pattern[:length] if io == P.IoType.WRITE else self.scratch[:length]
        return self.sysint.io(self.attrs[rows["path"][i]], io, self._regions(i), buf,
                              CallContext((rows["callid"][i],), rows["func"][i]))

    def _access(self, i: int) -> None:
        """One independent call."""
        self._as(self.rows["rank"][i])
        rec = self._record(i, t_start=clock.now(), collective=False)
        try:
            rec.bytes = self._io(i)
        except FsError as exc:
            rec.bytes, rec.error = 0, str(exc)
        rec.t_end = clock.now()
        self.trace.call(rec)
        self._ended(i)

    def _collective(self, calls: list[int]) -> None:
        """One collective call of every participant (``calls``, one per rank, in rank order)."""
        rows = self.rows
        calls = sorted(calls, key=lambda i: rows["rank"][i])
        ranks = [rows["rank"][i] for i in calls]
        self.comm.Barrier()  # every participant has arrived
        if self.scale is not None:
            self._wait_until(self.t0 + int(min(rows["t_start"][i] for i in calls) * self.scale))
        path, io = rows["path"][calls[0]], _IO[rows["io"][calls[0]]]
        hints = CbHints.from_info(self.hints[path], self.hosts)
        tp = TwoPhase(self.sysint, None, self.attrs[path], hints, ranks, self.ranks_per_host)
        regions = {i: self._regions(i) for i in calls}
        ranges = [(r[0][0], max(o + n for o, n in r)) if r else (None, None) for r in regions.values()]
        domains = file_domains(ranges, len(tp.aggs), hints.mode(io))
        error = None
        try:
            if domains is None:  # independent access, each rank its own
                for i in calls:
                    if rows["rank"][i] % self.procs == self.me:
                        self._io(i)
            else:
                for agg, (lo, hi) in zip(tp.aggs, domains):
                    if ranks[agg] % self.procs == self.me:
                        self._aggregate(tp, io, regions, calls[agg], lo, hi)
        except FsError as exc:
            error = str(exc)
        errors = [e for e in self.comm.allgather(error) if e]
        t_end = clock.now()
        for i in calls:
            rank = rows["rank"][i]
            if rank % self.procs != self.me:
                continue
            self._as(rank)
            rec = self._record(i, t_start=self.last_end[rank], t_end=t_end, collective=True,
                               coll_seq=rows["coll_seq"][i], bytes=0 if errors else rows["length"][i],
                               error=errors[0] if errors else None)
            self.trace.call(rec)
            self._ended(i)

    def _aggregate(self, tp: TwoPhase, io: P.IoType, regions: dict[int, list[tuple[int, int]]], agg: int,
                   lo: int, hi: int) -> None:
        """Aggregator ``agg`` (one of the calls, whose file ranges are ``regions``, in rank order)
        accesses its domain ``[lo, hi)`` for every call."""
        rows = self.rows
        self._as(rows["rank"][agg])
        mine = CallContext((rows["callid"][agg],), rows["func"][agg])
        parts = {i: [(o, n) for o, n, _ in overlap(r, lo, hi)] for i, r in regions.items()}
        if io == P.IoType.WRITE:
            tp.write_domain([(rows["callid"][i], runs, self.pattern[:sum(n for _, n in runs)])
                             for i, runs in parts.items() if runs], mine)
        else:
            tp.read_domain([(rows["callid"][i], runs) if runs else None for i, runs in parts.items()], mine)

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
        STATE.flush = replayer.trace.close
        replayer.run()
    except BaseException as exc:  # a failing replayer stops the others (as callid.launch does)
        traceback.print_exc()
        write_marker(config.trace_dir, me, "failed", f"replayer {me}: {type(exc).__name__}: {exc}")
        if replayer is not None:
            replayer.close()
        marker(config.trace_dir, me, "running").unlink(missing_ok=True)
        end_job(comm, 1)
    replayer.close()
    marker(config.trace_dir, me, "running").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
