"""Export a merged database (or a selection of it) as an OTF2 archive, for Vampir and Scalasca.

``out`` is the archive's directory: its anchor file is ``out/traces.otf2`` (what Vampir opens), with
``out/traces.def`` and ``out/traces/``.  It is built in a hidden directory next to ``out`` and renamed
at the end; an existing ``out`` is replaced only if it is an OTF2 archive (or empty).

What the records are:

* **Locations.**  A location group (a process) per rank, ``rank N``, and per server, ``server NAME``,
  under a system tree node per clock domain (``host0``, ``io0``, ...).  A rank's calls are on its
  location ``rank N``, a server's events on a location per layer, ``NAME LAYER`` (layer req, flow,
  trove, meta).  Events of one rank or layer that overlap in time go to extra locations, lanes
  (``rank N #2``, ``io0 trove #2``: the lanes of :mod:`pipeline.tracks`, as in the other exports), so
  the records of every location follow each other in time and nest properly.  When every rank of the
  run is exported, the group ``MPI ranks`` and the communicator ``MPI_COMM_WORLD`` list the ranks'
  locations in rank order.
* **Calls.**  ``Enter``/``Leave`` of a region named after the MPI function (paradigm MPI; the
  collective MPI calls without I/O, e.g. ``MPI_Barrier``, too).  A data call (a read or write moving
  bytes) holds an ``IoOperationBegin``/``IoOperationComplete`` pair (mode read or write; flag
  collective for a collective call; bytes requested and moved) on the I/O handle of its rank and
  file (paradigm MPI-IO); ``MPI_File_sync`` a flush.  A non-blocking call's operation is issued when
  the call returns (``IoOperationIssued``) and completes at the wait that completed it.
* **Server events.**  ``Enter``/``Leave`` of a region named after the operation (``io_write``,
  ``flow_write``, ``trove_write``, ``keyval_write``, ...).  A disk operation (Trove and metadata
  layers) that reads, writes or flushes holds an ``IoOperationBegin``/``IoOperationComplete`` pair
  on the I/O handle of its server and object handle (paradigm Trove).
* **Arrows** (call -> disk operation): one ``ParameterUnsignedInt`` record of the parameter
  ``served CallID`` per call the disk operation serves, at its start, inside its region: the value
  and the attribute ``callid`` are the call's CallID, the attribute ``own_bytes`` the call's own
  bytes of the operation (its data the operation read or wrote: arrows.own_bytes) when known.  One
  record per call rather than one list: an OTF2 attribute list holds one value per attribute.  A
  reader joins the calls (``callid`` of their ``Enter``) to the disk operations by CallID.
* **Attributes**: ``callid`` (uint64) on every ``Enter`` and ``IoOperationBegin`` of an event that has
  a CallID, ``event_id`` on every server event's ``Enter``, ``offset`` (the file offset of a call,
  the physical offset of a disk operation) on ``IoOperationBegin``.  Every operation has its own
  matching id.
* **Clock**: nanoseconds (timer resolution 10^9), times on callid's reference clock; the global
  offset is the run's start (``run.start_ns``), so Vampir's times are the ``t_rel_ns`` of the tables.

The records are streamed per location from ordered DuckDB queries (Arrow batches) and written
location after location: memory does not grow with the trace.  The OTF2 writer takes one record per
call, so the writing is a loop over the records, through the C functions of the ``otf2`` package's
library bound once (its Python event classes cost several times more per record).
"""

from __future__ import annotations

import ctypes
import heapq
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import _otf2
import duckdb
import numpy as np
import otf2
from _otf2.Config import lib_path
from otf2.definition_writer import DefinitionWriter
from otf2.enums import (
    IoAccessMode,
    IoHandleFlag,
    IoOperationFlag,
    IoOperationMode,
    IoParadigmClass,
    IoParadigmFlag,
    LocationGroupType,
    LocationType,
    Paradigm,
    ParameterType,
    RegionRole,
    Type,
)

from callid_core import schema as S
from callid_core.atomic import check_space, install, temporary
from callid_core.errors import BadValue, Failed, InputError
from pipeline.domain import DATA_CALL_WHERE
from pipeline.merged import Merged
from pipeline.selection import Selection, select_views
from pipeline.tracks import LaneAssigner, lane_name

__all__ = ["ANCHOR", "write_otf2"]

#: the anchor file's name inside the archive directory
ANCHOR = "traces.otf2"
#: rows per Arrow batch
BATCH = 65_536
#: DuckDB's memory for the ordered queries (it spills to a temporary directory beyond)
MEMORY_LIMIT = "256MB"
#: the event and definition chunks of each location's buffers (OTF2's smallest: a chunk of each is
#: allocated for every location open, and a rank or a server layer may have hundreds of lanes)
CHUNK = 256 * 1024
#: bytes of archive per call or server event (with its arrows), to check the free space before writing
EST_EVENT = 100

_READ, _WRITE, _FLUSH = (IoOperationMode.READ.value, IoOperationMode.WRITE.value,
                         IoOperationMode.FLUSH.value)
_NON_BLOCKING, _COLLECTIVE = IoOperationFlag.NON_BLOCKING.value, IoOperationFlag.COLLECTIVE.value


def _io_mode_sql(name: str) -> str:
    """SQL: the I/O operation mode of a function or operation named ``name`` (null: none)."""
    return (f"CASE WHEN {name} LIKE '%read%' THEN {_READ} WHEN {name} LIKE '%write%' THEN {_WRITE} "
            f"WHEN {name} LIKE '%flush%' OR {name} LIKE '%sync%' THEN {_FLUSH} END")


class _C:
    """The OTF2 library's event-writing functions, bound once (plain ints for pointers)."""

    def __init__(self) -> None:
        lib = ctypes.CDLL(lib_path())  # our own function objects: the package's wrappers re-type theirs
        p, u8, u32 = ctypes.c_void_p, ctypes.c_uint8, ctypes.c_uint32
        u64, i64 = ctypes.c_uint64, ctypes.c_int64

        def bind(name: str, *argtypes):
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = list(argtypes), ctypes.c_int
            return fn

        self.enter = bind("OTF2_EvtWriter_Enter", p, p, u64, u32)
        self.leave = bind("OTF2_EvtWriter_Leave", p, p, u64, u32)
        self.begin = bind("OTF2_EvtWriter_IoOperationBegin", p, p, u64, u32, u8, u32, u64, u64)
        self.issued = bind("OTF2_EvtWriter_IoOperationIssued", p, p, u64, u32, u64)
        self.complete = bind("OTF2_EvtWriter_IoOperationComplete", p, p, u64, u32, u64, u64)
        self.param = bind("OTF2_EvtWriter_ParameterUnsignedInt", p, p, u64, u32, u64)
        self.add_u64 = bind("OTF2_AttributeList_AddUint64", p, u32, u64)
        self.add_i64 = bind("OTF2_AttributeList_AddInt64", p, u32, i64)


class _Archive(otf2.writer.Writer):
    """The package's writer, with the clock properties given (not taken from the wall clock)."""

    clock: tuple[int, int, int] = (0, 0, 0)  # global offset, trace length, realtime of the offset

    def _write_global_definitions(self) -> None:
        if not self.is_primary:
            return
        with DefinitionWriter(self) as writer:
            writer.write_clock_properties(self.timer_resolution, *self.clock)
            self.definitions.write(writer)


class _Lane:
    """One location being written: its event writer, and the completions of non-blocking operations
    still to write (time, handle, bytes, matching id)."""

    __slots__ = ("location", "writer", "ptr", "pending")

    def __init__(self, archive: _Archive, location) -> None:
        self.location = location
        self.writer = archive.event_writer_from_location(location)
        self.ptr = ctypes.cast(self.writer.handle, ctypes.c_void_p).value
        self.pending: list[tuple[int, int, int, int]] = []

    def finish(self) -> None:
        """Close the event writer now (its buffer is written and freed), once."""
        self.location._number_of_events_written = _otf2.EvtWriter_GetNumberOfEvents(self.writer.handle)
        self.writer.close()
        self.writer.close = lambda: None  # the archive closes every writer again at the end


class _Family:
    """The locations of one rank or of one layer of a server, as lanes (:class:`pipeline.tracks.LaneAssigner`,
    the lanes the other exports make): lane k is location ``make(k)``, made when first used."""

    def __init__(self, key: object, make: Callable[[int], _Lane]) -> None:
        self.key, self.make = key, make
        self.assigner = LaneAssigner(1)
        self.lanes: list[_Lane | None] = []

    def assign(self, ts: np.ndarray, te: np.ndarray) -> list[int]:
        """The lanes of events sorted by start (an instant holds its lane for 1 ns), their locations made."""
        lanes = self.assigner.assign(np.zeros(len(ts), np.int64), ts, np.maximum(te, ts + 1))
        for k in np.unique(lanes).tolist():
            self.lanes.extend([None] * (k + 1 - len(self.lanes)))
            if self.lanes[k] is None:
                self.lanes[k] = self.make(k)
        return lanes.tolist()

    def finish(self, flush: Callable[[_Lane, int], None]) -> None:
        for lane in self.lanes:
            if lane is not None:
                flush(lane, 2**64 - 1)
                lane.finish()


def _segments(key: np.ndarray) -> Iterator[tuple[int, int]]:
    """The runs of equal ``key`` in a batch, as (start, stop)."""
    bounds = [0, *(np.flatnonzero(key[1:] != key[:-1]) + 1).tolist(), len(key)]
    return zip(bounds[:-1], bounds[1:])


def _check_output(out: Path) -> None:
    if out.suffix == ".otf2":
        raise BadValue(f"{out}: -o names the archive's directory (its anchor file is DIR/{ANCHOR}): "
                       f"give a directory, e.g. -o {out.with_suffix('')}")
    if not out.parent.is_dir():
        raise InputError(f"{out}: directory {out.parent} does not exist")
    if out.is_dir() and any(out.iterdir()) and not (out / ANCHOR).is_file():
        raise InputError(f"{out}: exists and is not an OTF2 archive (no {ANCHOR}); give a new directory")
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: is a file; an OTF2 archive is a directory")


def _batches(con: duckdb.DuckDBPyConnection, sql: str) -> Iterator[tuple[dict[str, list], dict]]:
    """The rows of a query, a batch at a time: its columns as Python values, and as numpy arrays."""
    for batch in con.sql(sql).to_arrow_reader(BATCH):
        if batch.num_rows:
            cols = dict(zip(batch.schema.names, batch.columns))
            yield ({name: col.to_pylist() for name, col in cols.items()},
                   {name: col.to_numpy(zero_copy_only=False) for name, col in cols.items()
                    if name in ("family", "ts", "te", "arrow")})


def write_otf2(m: Merged, out: str, sel: Selection,
               on_progress: Callable[[int, int], None] | None = None) -> dict:
    """Write the selection of ``m`` as an OTF2 archive in the directory ``out`` (anchor file
    ``out/traces.otf2``); return ``output``, ``anchor``, ``format``, ``events`` (calls and server
    events), ``arrows``, ``bytes`` (the archive's size), ``records`` (OTF2 event records),
    ``locations`` and ``seconds``.  ``on_progress(done, total)`` counts the events written."""
    started = time.monotonic()
    out_path = Path(out)
    _check_output(out_path)
    tmp = temporary(out_path)
    con = m.con
    with m.settings(memory_limit=MEMORY_LIMIT):
        select_views(con, sel)
        total = con.execute("SELECT (SELECT count(*) FROM sel_calls) + (SELECT count(*) FROM sel_ops) "
                            "+ (SELECT count(*) FROM sel_mpi_calls)").fetchone()[0]
        if total == 0:
            raise sel.empty("export")
        check_space(out_path, total * EST_EVENT, "the archive")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            summary = _Writer(con, tmp, sel, total, on_progress).run()
            install(tmp, out_path)
        except OSError as exc:
            raise InputError(f"{out}: cannot write ({exc.strerror or exc})") from None
        except duckdb.OutOfMemoryException:
            raise sel.too_big() from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return {"output": str(out_path), "anchor": str(out_path / ANCHOR), "format": "otf2", **summary,
            "bytes": _size(out_path), "seconds": round(time.monotonic() - started, 3)}


class _Writer:
    """One export: definitions first, then the calls rank by rank, then the server events server by
    server and layer by layer."""

    def __init__(self, con: duckdb.DuckDBPyConnection, tmp: Path, sel: Selection, total: int,
                 on_progress: Callable[[int, int], None] | None) -> None:
        self.con, self.sel = con, sel
        self.total, self.on_progress = total, on_progress
        self.c = _C()
        self.archive = _Archive(str(tmp), chunk_size_events=CHUNK,
                               chunk_size_definitions=CHUNK, timer_resolution=10**9)
        self.defs = self.archive.definitions
        self.attributes = _otf2.AttributeList_New()  # one list, emptied by every record written with it
        self.al = ctypes.cast(self.attributes, ctypes.c_void_p).value
        self.bad = 0
        self.matching = 0
        self.records = 0
        self.arrows = 0
        self.events = 0

    # -- definitions -------------------------------------------------------------------------------

    def _define(self) -> None:
        """The definitions, in this order: the archive and its clock, the attributes, the ranks' and the
        servers' locations, the regions, the I/O handles."""
        run_id = self._define_archive()
        root = self.defs.system_tree_node(f"callid run {run_id}".strip(), class_name="machine")
        nodes: dict[str, object] = {}

        def node(clock: str):
            if clock not in nodes:
                nodes[clock] = self.defs.system_tree_node(clock, class_name="node", parent=root)
            return nodes[clock]

        self._define_attributes()
        self._define_ranks(node)
        self._define_servers(node)
        self._define_regions()
        self._define_io(root, node)

    def _define_archive(self) -> str:
        """The archive's creator, description and clock (its offset the run's start); the run's id."""
        con = self.con
        run = dict(con.execute("SELECT key, value FROM run WHERE key IN ('start_ns', 'client.run_id', "
                               "'server.run_id')").fetchall())
        run_id = run.get("client.run_id") or run.get("server.run_id") or ""
        self.archive.creator = "callid export"
        self.archive.description = f"callid run {run_id}: {self.sel.describe()}".strip()
        self.archive.machine_name = "callid"
        lo, hi = con.execute("""
            SELECT min(lo), max(hi) FROM (
                SELECT min(t_start) AS lo, max(greatest(t_end, t_start)) AS hi FROM sel_calls
                UNION ALL SELECT min(t_start), max(greatest(t_end, t_start)) FROM sel_ops
                UNION ALL SELECT min(t_start), max(greatest(t_end, t_start)) FROM sel_mpi_calls
                UNION ALL SELECT NULL, max(w.t_end) FROM waits w SEMI JOIN sel_calls c
                          ON c.rank = w.rank AND c.rid = w.rid)""").fetchone()
        start = int(run["start_ns"]) if run.get("start_ns") not in (None, "") else lo
        offset = min(start, lo)
        # times on the reference clock are ns since the epoch when it is a real clock
        realtime = offset if offset > 10**17 else otf2.Undefined.TIMESTAMP.value
        self.archive.clock = (offset, hi - offset, realtime)
        return run_id

    def _define_attributes(self) -> None:
        """The attributes ``callid``, ``event_id``, ``offset``, ``bytes``; the parameter ``served CallID``."""
        d = self.defs
        self.attr_callid = d.attribute("callid", "the CallID of the call (of the call served, on a "
                                       "'served CallID' record)", type=Type.UINT64)._ref
        self.attr_event = d.attribute("event_id", "the server event's id (server_ops.event_id)",
                                      type=Type.INT64)._ref
        self.attr_offset = d.attribute("offset", "the offset in the file (calls) or the physical offset "
                                       "in the datafile (disk operations)", type=Type.INT64)._ref
        self.attr_bytes = d.attribute("own_bytes", "the served call's own bytes of the disk operation "
                                      "(its data the operation read or wrote)", type=Type.UINT64)._ref
        self.served = d.parameter("served CallID", parameter_type=ParameterType.UINT64)._ref

    def _define_ranks(self, node: Callable[[str], object]) -> None:
        """A process per rank under its clock's node, the location of lane 0 made now (in rank order); the
        world's group and communicator when every rank of the run is exported."""
        con, d = self.con, self.defs
        ranks = con.execute("""
            SELECT rank, any_value(clock ORDER BY clock) FROM (
                SELECT rank, clock FROM sel_calls UNION ALL SELECT rank, clock FROM sel_mpi_calls)
            GROUP BY rank ORDER BY rank""").fetchall()
        self.rank_groups, self.rank_main = {}, {}
        for rank, clock in ranks:
            group = d.location_group(f"rank {rank}", location_group_type=LocationGroupType.PROCESS,
                                     system_tree_parent=node(clock or "host"))
            self.rank_groups[rank] = group
            self.rank_main[rank] = d.location(f"rank {rank}", type=LocationType.CPU_THREAD, group=group)
        every = [r for (r,) in con.execute("SELECT DISTINCT rank FROM calls UNION SELECT DISTINCT rank "
                                           "FROM mpi_calls ORDER BY 1").fetchall()]
        if ranks and [r for r, _ in ranks] == every == list(range(len(every))):  # the run's ranks: the world
            members = tuple(self.rank_main[r] for r, _ in ranks)
            d.group("MPI ranks", group_type=otf2.GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI,
                    members=members)
            world = d.group("MPI_COMM_WORLD", group_type=otf2.GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                            members=members)
            d.comm("MPI_COMM_WORLD", group=world)

    def _define_servers(self, node: Callable[[str], object]) -> None:
        """A process per server, under its clock's node."""
        con, d = self.con, self.defs
        self.server_groups = {
            server: d.location_group(f"server {server}", location_group_type=LocationGroupType.PROCESS,
                                     system_tree_parent=node(clock or server))
            for server, clock in con.execute("SELECT server, any_value(clock ORDER BY clock) FROM sel_ops "
                                             "GROUP BY server ORDER BY server").fetchall()}

    def _define_regions(self) -> None:
        """A region per MPI function called and per server layer and operation."""
        con, d = self.con, self.defs
        self.call_regions = {
            func: d.region(func, paradigm=Paradigm.MPI, region_role=RegionRole.FILE_IO
                           if func.startswith("MPI_File_") else RegionRole.FUNCTION)._ref
            for (func,) in con.execute("SELECT DISTINCT func FROM sel_calls ORDER BY 1").fetchall()}
        # the calls without I/O and the nested calls: collective or point to point
        self.call_regions.update({
            func: d.region(func, paradigm=Paradigm.MPI, region_role=RegionRole.BARRIER if "Barrier" in func
                           else RegionRole.COLL_OTHER if coll else RegionRole.POINT2POINT)._ref
            for func, coll in con.execute("SELECT func, bool_or(collective IS NOT FALSE) FROM sel_mpi_calls "
                                          "GROUP BY func ORDER BY 1").fetchall()})
        roles = {"trove": RegionRole.FILE_IO, "meta": RegionRole.FILE_IO_METADATA}
        self.op_regions = {
            (layer, op): d.region(op, description=f"server layer {layer}", paradigm=Paradigm.USER,
                                  region_role=roles.get(layer, RegionRole.FUNCTION))._ref
            for layer, op in con.execute("SELECT DISTINCT layer, op FROM sel_ops ORDER BY 1, 2").fetchall()}

    def _define_io(self, root: object, node: Callable[[str], object]) -> None:
        """An I/O handle per rank and file (MPI-IO), per server and object handle (Trove); all open
        before the trace starts (pre-created, read-write)."""
        con, d = self.con, self.defs
        mpiio = d.io_paradigm("MPI-IO", "MPI I/O", IoParadigmClass.PARALLEL, IoParadigmFlag.NONE)
        trove = d.io_paradigm("TROVE", "Trove (server storage)", IoParadigmClass.SERIAL, IoParadigmFlag.NONE)
        files: dict[str, object] = {}
        self.call_handles = {}
        for rank, file in con.execute("SELECT DISTINCT rank, file FROM sel_calls WHERE file IS NOT NULL "
                                      "ORDER BY 1, 2").fetchall():
            if file not in files:
                files[file] = d.io_regular_file(file, scope=root)
            handle = d.io_handle(f"rank {rank}: {file}", file=files[file], io_paradigm=mpiio,
                                 io_handle_flags=IoHandleFlag.PRE_CREATED)
            d.io_pre_created_handle_state(handle, IoAccessMode.READ_WRITE)
            self.call_handles[(rank, file)] = handle._ref
        self.op_handles = {}
        for server, clock, handle_id in con.execute(f"""
                SELECT server, any_value(clock ORDER BY clock), coalesce(handle, 0) FROM sel_ops
                WHERE layer IN ({S.DISK_LAYERS_SQL}) GROUP BY ALL ORDER BY 1, 3""").fetchall():
            name = f"{server}:{handle_id:#x}"
            obj = d.io_regular_file(name, scope=node(clock or server))
            handle = d.io_handle(name, file=obj, io_paradigm=trove, io_handle_flags=IoHandleFlag.PRE_CREATED)
            d.io_pre_created_handle_state(handle, IoAccessMode.READ_WRITE)
            self.op_handles[(server, handle_id)] = handle._ref

    # -- events ------------------------------------------------------------------------------------

    def run(self) -> dict:
        try:
            self._define()
            self._calls()
            self._ops()
        finally:
            _otf2.AttributeList_Delete(self.attributes)
            self.archive.close()
        return {"events": self.events, "arrows": self.arrows, "records": self.records,
                "locations": len(self.defs.locations)}

    def _progress(self) -> None:
        if self.bad:
            raise Failed("OTF2 could not write the archive (see its message above; is the disk full?)")
        if self.on_progress is not None:
            self.on_progress(self.events, self.total)

    def _flush_pending(self, lane: _Lane, t: int) -> None:
        """Write the completions of non-blocking operations due by ``t``."""
        while lane.pending and lane.pending[0][0] <= t:
            te, handle, nbytes, mid = heapq.heappop(lane.pending)
            self.bad |= self.c.complete(lane.ptr, None, te, handle, nbytes, mid)
            self.records += 1

    def _calls(self) -> None:
        """The calls and the collective MPI calls, rank by rank in time order."""
        sql = f"""
            SELECT c.rank AS family, c.t_start AS ts, greatest(c.t_end, c.t_start) AS te, c.func, c.callid,
                   c.file, CASE WHEN {DATA_CALL_WHERE} THEN {_io_mode_sql('c.func')}
                                WHEN c.func = 'MPI_File_sync' THEN {_FLUSH} END AS mode,
                   coalesce(c.size, 0) AS size, coalesce(c.bytes, c.size, 0) AS moved, c.file_offset,
                   coalesce(c.collective, false) AS coll,
                   c.func LIKE 'MPI_File_i%' AS nb, greatest(w.t_done, c.t_end, c.t_start) AS t_done
            FROM sel_calls c
            LEFT JOIN (SELECT rank, rid, max(t_end) AS t_done FROM waits WHERE rid IS NOT NULL GROUP BY ALL) w
                   ON c.func LIKE 'MPI_File_i%' AND w.rank = c.rank AND w.rid = c.rid
            UNION ALL
            SELECT rank, t_start, greatest(t_end, t_start), func, NULL, NULL, NULL, 0, 0, NULL,
                   coalesce(collective, true), false, NULL
            FROM sel_mpi_calls
            ORDER BY family, ts, te DESC"""
        c, al = self.c, self.al
        enter, leave, begin, issued, complete = c.enter, c.leave, c.begin, c.issued, c.complete
        add = c.add_u64
        a_callid, a_offset = self.attr_callid, self.attr_offset
        regions, handles = self.call_regions, self.call_handles
        family: _Family | None = None
        bad = records = 0
        for b, arrays in _batches(self.con, sql):
            for i, j in _segments(arrays["family"]):
                rank = b["family"][i]
                if family is None or family.key != rank:
                    if family is not None:
                        family.finish(self._flush_pending)
                    family = _Family(rank, self._rank_lane(rank))
                lanes = family.lanes
                for k, ts, te, func, callid, file, mode, size, moved, offset, coll, nb, t_done in zip(
                        family.assign(arrays["ts"][i:j], arrays["te"][i:j]), b["ts"][i:j], b["te"][i:j],
                        b["func"][i:j], b["callid"][i:j], b["file"][i:j], b["mode"][i:j], b["size"][i:j],
                        b["moved"][i:j], b["file_offset"][i:j], b["coll"][i:j], b["nb"][i:j],
                        b["t_done"][i:j]):
                    lane = lanes[k]
                    if lane.pending:
                        self._flush_pending(lane, ts)
                    h = lane.ptr
                    region = regions[func]
                    if callid is not None:
                        add(al, a_callid, callid)
                    bad |= enter(h, al, ts, region)
                    records += 2
                    io = mode is not None and (rank, file) in handles
                    if io:
                        handle = handles[(rank, file)]
                        self.matching += 1
                        mid = self.matching
                        if callid is not None:
                            add(al, a_callid, callid)
                        if offset is not None:
                            c.add_i64(al, a_offset, offset)
                        flags = (_COLLECTIVE if coll else 0) | (_NON_BLOCKING if nb else 0)
                        bad |= begin(h, al, ts, handle, mode, flags, size, mid)
                        records += 2
                    if lane.pending:  # earlier operations completing during this call
                        self._flush_pending(lane, te)
                    if io and nb:
                        bad |= issued(h, None, te, handle, mid)
                        records += 1
                        heapq.heappush(lane.pending, (t_done, handle, moved, mid))
                        self._flush_pending(lane, te)
                    elif io:
                        bad |= complete(h, None, te, handle, moved, mid)
                    bad |= leave(h, None, te, region)
            self.events += len(b["ts"])
            self.records, self.bad = self.records + records, self.bad | bad
            records = bad = 0
            self._progress()
        if family is not None:
            family.finish(self._flush_pending)

    def _rank_lane(self, rank: int) -> Callable[[int], _Lane]:
        def make(k: int) -> _Lane:
            location = self.rank_main[rank] if k == 0 else self.defs.location(
                lane_name(f"rank {rank}", k), type=LocationType.CPU_THREAD, group=self.rank_groups[rank])
            return _Lane(self.archive, location)
        return make

    def _op_lane(self, server: str, layer: str) -> Callable[[int], _Lane]:
        def make(k: int) -> _Lane:
            location = self.defs.location(lane_name(f"{server} {layer}", k), type=LocationType.CPU_THREAD,
                                          group=self.server_groups[server])
            return _Lane(self.archive, location)
        return make

    def _ops(self) -> None:
        """The server events, server by server and layer by layer in time order; each disk operation's
        arrows are rows right after it in the same ordered stream (no join, no aggregate: the sort
        spills to disk)."""
        families = self.con.execute("SELECT DISTINCT server, layer FROM sel_ops ORDER BY 1, 2").fetchall()
        self.con.execute("CREATE OR REPLACE TEMP TABLE o2_families AS SELECT * FROM "
                         "(SELECT unnest(?::VARCHAR[]) AS server, unnest(?::VARCHAR[]) AS layer, "
                         "unnest(range(?)) AS family)",
                         [[s for s, _ in families], [lay for _, lay in families], len(families)])
        sql = f"""
            SELECT f.family, o.layer, o.op, o.t_start AS ts, greatest(o.t_end, o.t_start) AS te, o.event_id,
                   o.callid, coalesce(o.handle, 0) AS handle, o.disk_offset, coalesce(o.size, 0) AS size,
                   CASE WHEN o.layer IN ({S.DISK_LAYERS_SQL}) THEN {_io_mode_sql('o.op')} END AS mode,
                   NULL::BIGINT AS bytes, 0 AS arrow
            FROM sel_ops o JOIN o2_families f USING (server, layer)
            UNION ALL
            SELECT f.family, a.layer, NULL, a.t_start, greatest(a.t_end, a.t_start), a.event_id, a.callid,
                   NULL, NULL, NULL, NULL, a.own_bytes, 1
            FROM sel_arrows a JOIN o2_families f USING (server, layer)
            ORDER BY family, ts, te DESC, event_id, arrow, callid"""
        family: _Family | None = None
        open_op, lost = _OpenOp(), 0
        for b, arrays in _batches(self.con, sql):
            for i, j in _segments(arrays["family"]):
                key = b["family"][i]
                if family is None or family.key != key:
                    open_op = self._close_op(open_op)  # (the previous family's last operation)
                    if family is not None:
                        family.finish(self._flush_pending)
                    family = _Family(key, self._op_lane(*families[key]))
                open_op, missed = self._op_rows(b, arrays, i, j, family, families[key][0], open_op)
                lost += missed
            self._progress()
        self._close_op(open_op)
        if family is not None:
            family.finish(self._flush_pending)
        if lost:
            raise Failed(f"{lost} arrows name a disk operation server_ops does not hold (at its time): "
                         "the database is inconsistent; merge the logs again")

    def _close_op(self, op: _OpenOp) -> _OpenOp:
        """Complete the open operation's I/O (if it has any) and leave its region; nothing is open after."""
        if op.h is not None:
            if op.handle is not None:
                self.bad |= self.c.complete(op.h, None, op.te, op.handle, op.size, self.matching)
            self.bad |= self.c.leave(op.h, None, op.te, op.region)
        return _OpenOp()

    def _op_rows(self, b: dict[str, list], arrays: dict, i: int, j: int, family: _Family, server: str,
                 open_op: _OpenOp) -> tuple[_OpenOp, int]:
        """Write rows ``i:j`` of a batch of :meth:`_ops` (one family: ``server``'s events of one layer, and
        their arrows); the operation left open for the arrows of the next rows, and the arrows lost (the
        disk operation they name is not the open one)."""
        c, al = self.c, self.al
        enter, leave, begin, complete, param = c.enter, c.leave, c.begin, c.complete, c.param
        add, add_i64 = c.add_u64, c.add_i64
        a_callid, a_event, a_offset = self.attr_callid, self.attr_event, self.attr_offset
        a_bytes = self.attr_bytes
        served, regions, handles = self.served, self.op_regions, self.op_handles
        bad = records = arrows = lost = 0
        # the operation written up to its arrows (locals in the loop: one step per record)
        h, open_eid, open_te = open_op.h, open_op.eid, open_op.te
        open_region, open_handle, open_size = open_op.region, open_op.handle, open_op.size
        is_op = arrays["arrow"][i:j] == 0
        ops = iter(family.assign(arrays["ts"][i:j][is_op], arrays["te"][i:j][is_op]))
        lanes = family.lanes
        for layer, op, ts, te, eid, callid, handle_id, offset, size, mode, nbytes, arrow in zip(
                b["layer"][i:j], b["op"][i:j], b["ts"][i:j], b["te"][i:j], b["event_id"][i:j],
                b["callid"][i:j], b["handle"][i:j], b["disk_offset"][i:j], b["size"][i:j],
                b["mode"][i:j], b["bytes"][i:j], b["arrow"][i:j]):
            if arrow:  # a call the open disk operation serves
                if eid != open_eid:
                    lost += 1
                    continue
                add(al, a_callid, callid)
                if nbytes is not None:
                    add(al, a_bytes, nbytes)
                bad |= param(h, al, ts, served, callid)
                arrows += 1
                continue
            if h is not None:  # close the previous operation
                if open_handle is not None:
                    bad |= complete(h, None, open_te, open_handle, open_size, self.matching)
                bad |= leave(h, None, open_te, open_region)
            h = lanes[next(ops)].ptr
            open_eid, open_te, open_region = eid, te, regions[(layer, op)]
            if callid is not None:
                add(al, a_callid, callid)
            add_i64(al, a_event, eid)
            bad |= enter(h, al, ts, open_region)
            records += 2
            open_handle = None
            if mode is not None:
                open_handle, open_size = handles[(server, handle_id)], size
                self.matching += 1
                if callid is not None:
                    add(al, a_callid, callid)
                if offset is not None:
                    add_i64(al, a_offset, offset)
                bad |= begin(h, al, ts, open_handle, mode, 0, size, self.matching)
                records += 2
            self.events += 1
        self.records, self.arrows = self.records + records + arrows, self.arrows + arrows
        self.bad |= bad
        return _OpenOp(h=h, eid=open_eid, te=open_te, region=open_region, handle=open_handle,
                       size=open_size), lost


@dataclass(frozen=True)
class _OpenOp:
    """The server operation written up to its arrows (none: location None): its location (the writer's
    pointer), event id, end, region, and I/O handle and size (handle None: no I/O)."""

    h: int | None = None
    eid: int | None = None
    te: int | None = None
    region: int | None = None
    handle: int | None = None
    size: int | None = None


def _size(path: Path) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
