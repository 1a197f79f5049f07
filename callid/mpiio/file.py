"""The traced ``MPI.File``: every public method is one line over :func:`_call`.

``_call`` stamps a CallID, runs the call either on the simulated file system
(:class:`SimFile`, for names under a mount prefix) or on the real MPI-IO of the
MPI library, and logs one row with what was asked and what was done.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mpi4py import MPI

from callid.mpiio import comm as traced_comm
from callid.mpiio.datatypes import TypeLog, at_addresses, buffer_spec, flatten, overlapping, type_name
from callid.mpiio.errors import SimIOError, error_text
from callid.mpiio.record import Record
from callid.mpiio.simfile import SimFile
from callid.mpiio.sysint import SysInt
from callid.trace import ClientTrace
from callid_core import clock
from callid_core.config import DEFAULT_FLUSH_ROWS, Config, host_of
from callid_core.devices import faults_from_json, straggles
from callid_core.filenames import canonical
from callid_core.ids import DEFAULT_LAYOUT, Layout, Stamper
from server_sim import protocol as P

_BaseFile = MPI.File  # the library's class, captured before launch replaces MPI.File


@dataclass(frozen=True)
class CallSpec:
    """What the trace needs to know about one ``MPI.File`` method."""

    func: str
    collective: bool = False
    access: str | None = None  # "read" / "write" for data access
    position: str | None = None  # at (explicit offset), ind (individual), shared, ordered
    mode: str = "blocking"  # blocking, nonblocking, begin, end (split collective)
    #: fills in what the call's arguments say beyond the common columns (the arguments _call gets)
    describe: Callable[[Record, tuple], None] | None = None


def hints_text(info: Any) -> str | None:
    """``'key=value;key=value'`` of an ``MPI.Info`` (None: no hints, or hints not traced)."""
    if not isinstance(info, MPI.Info) or info == MPI.INFO_NULL or (_tracer is not None and not _tracer.hints):
        return None
    return ";".join(f"{k}={info.Get(k)}" for k in info.keys()) or None


#: ROMIO's hints file: the environment variable naming it, and where ROMIO looks without it
ROMIO_HINTS_ENV = "ROMIO_HINTS"
ROMIO_HINTS_DEFAULT = "/etc/romio-hints"


def system_hints() -> dict[str, str]:
    """The hints of ROMIO's hints file (``$ROMIO_HINTS``, else ``/etc/romio-hints``; none if it cannot be
    read): one ``key value`` per line, other lines ignored, as ROMIO reads it."""
    try:
        text = Path(os.environ.get(ROMIO_HINTS_ENV, ROMIO_HINTS_DEFAULT)).read_text(errors="replace")
    except OSError:
        return {}
    return {words[0]: words[1] for words in map(str.split, text.splitlines())
            if len(words) >= 2 and not words[0].startswith("#")}


def _with_system_hints(info: Any, system: dict[str, str]) -> MPI.Info:
    """A new ``MPI.Info``: the hints file's hints, and over them the program's own (as ROMIO merges them)."""
    merged = MPI.Info.Create()
    for key, value in system.items():
        merged.Set(key, value)
    if isinstance(info, MPI.Info) and info != MPI.INFO_NULL:
        for key in info.keys():
            merged.Set(key, info.Get(key))
    return merged


def _hints_at(where: int) -> Callable[[Record, tuple], None]:
    def describe(rec: Record, args: tuple) -> None:
        rec.hints = hints_text(args[where]) if len(args) > where else None
    return describe


def _view(rec: Record, args: tuple) -> None:
    """set_view: displacement, types, datarep, hints; the filetype's typemap and extent."""
    disp, etype, filetype, datarep, info = args
    filetype = etype if filetype is None else filetype
    rec.offset, rec.etype, rec.filetype, rec.datarep = disp, type_name(etype), type_name(filetype), datarep
    rec.hints = hints_text(info)
    if isinstance(etype, MPI.Datatype) and etype != MPI.DATATYPE_NULL:
        rec.etype_extent = etype.Get_extent()[1]
    try:
        flat, eflat = flatten(filetype), flatten(etype)
    except MPI.Exception:  # (a bad type: the call will say so)
        return
    rec.extent = flat.extent
    issues = ("address", at_addresses(flat, eflat)), ("overlapping", overlapping(eflat, 1))
    rec.type_issues = ",".join(name for name, found in issues if found) or None
    if flat.runs:
        rec.region_offsets, rec.region_lengths = (list(r) for r in zip(*flat.runs))


#: the access-mode flags of MPI_File_open and the seek modes (other MPI_MODE_* constants, of RMA,
#: may share their bits)
AMODES = ("RDONLY", "WRONLY", "RDWR", "CREATE", "EXCL", "DELETE_ON_CLOSE", "UNIQUE_OPEN", "SEQUENTIAL",
          "APPEND")
WHENCES = ("SET", "CUR", "END")


def amode_text(amode: int) -> str:
    """The access-mode flags set in ``amode``, without their prefix: 'RDWR,CREATE'."""
    return ",".join(name for name in AMODES if amode & getattr(MPI, "MODE_" + name))


def _whence(rec: Record, args: tuple) -> None:
    rec.relative_offset = args[0] if args and isinstance(args[0], int) else None
    whence = args[1] if len(args) > 1 else MPI.SEEK_SET
    rec.whence = next((n for n in WHENCES if getattr(MPI, "SEEK_" + n) == whence), str(whence))


def _size(rec: Record, args: tuple) -> None:
    rec.size = args[0] if args else None


def _atomicity(rec: Record, args: tuple) -> None:
    rec.atomicity = bool(args[0]) if args else None


def _specs() -> dict[str, CallSpec]:
    """Every traced method: the file manipulation calls, then the data-access family."""
    specs = {name: CallSpec("MPI_File_" + name.lower(), collective=coll) for name, coll in (
        ("Open", True), ("Close", True), ("Delete", False), ("Set_size", True), ("Preallocate", True),
        ("Get_size", False), ("Get_group", False), ("Get_amode", False), ("Set_info", True),
        ("Get_info", False), ("Sync", True), ("Set_atomicity", True), ("Get_atomicity", False),
        ("Set_view", True), ("Get_view", False), ("Seek", False), ("Seek_shared", True),
        ("Get_position", False), ("Get_position_shared", False), ("Get_byte_offset", False),
        ("Get_type_extent", False), ("Get_errhandler", False), ("Set_errhandler", False),
    )}
    for name, describe in (("Delete", _hints_at(2)), ("Set_info", _hints_at(0)), ("Set_view", _view),
                           ("Seek", _whence), ("Seek_shared", _whence), ("Set_atomicity", _atomicity),
                           ("Set_size", _size), ("Preallocate", _size)):
        specs[name] = replace(specs[name], describe=describe)
    families = {"": ("ind", False), "_at": ("at", False), "_shared": ("shared", False),
                "_all": ("ind", True), "_at_all": ("at", True), "_ordered": ("ordered", True)}
    for verb in ("Read", "Write"):
        for suffix, (position, coll) in families.items():
            name = verb + suffix
            spec = dict(access=verb.lower(), position=position, collective=coll)
            specs[name] = CallSpec("MPI_File_" + name.lower(), **spec)
            if suffix != "_ordered":
                iname = "I" + name.lower()
                specs[iname] = CallSpec("MPI_File_" + iname.lower(), mode="nonblocking", **spec)
            if coll:
                for part in ("begin", "end"):
                    specs[f"{name}_{part}"] = CallSpec(f"MPI_File_{name.lower()}_{part}", mode=part, **spec)
    return specs


SPECS: dict[str, CallSpec] = _specs()


class Tracer:
    """The tracing state of one rank: CallIDs, the trace log and the file-system client."""

    def __init__(self, rank: int, trace_dir: str, config: Config | None = None,
                 layout: str = str(DEFAULT_LAYOUT), stamp: bool = True, run_id: str = "") -> None:
        if config is not None:
            layout, stamp, run_id = config.callid_layout, config.callid, config.run_id
        self.stamper = Stamper(rank, Layout.parse(layout))
        self.stamp = stamp
        host = host_of(rank, config.ranks_per_host) if config else 0
        if config is not None:
            clock.use_domain(config.clock_skew, config.clock_t0, f"host{host}")
        self.trace = ClientTrace(trace_dir, rank, layout, run_id,
                                 config.to_json() if config else "{}", clock=f"host{host}",
                                 flush_rows=config.flush_rows if config else DEFAULT_FLUSH_ROWS,
                                 enabled=config.client_events if config else True)
        self.sysint = (SysInt(config, rank, self.trace.rpc, self.trace.phase)
                       if config and config.servers else None)
        self.mounts = [os.path.abspath(m) for m in config.mount] if config else []
        self.fids = itertools.count(1)
        self.opens = itertools.count(0)
        self.rids = itertools.count(1)
        #: the switches (Config.trace_hints, trace_mpi, trace_nested)
        self.hints, self.mpi, self.nested = ((config.trace_hints, config.trace_mpi, config.trace_nested)
                                             if config else (True, True, False))
        #: the hints of ROMIO's hints file: every open of the simulated file system gets them
        self.system_hints = system_hints()
        #: a planted fault: how late this rank comes to each of its MPI-IO calls (s)
        self.straggle_s = straggles(faults_from_json(config.faults)).get(rank, 0.0) if config else 0.0
        #: the groups MPI_File_get_group returned: (group, its size and id, the call's end)
        self.groups: list[tuple[MPI.Group, int, int, int]] = []
        #: the datatypes of the rank's calls, each logged once (kind 'type')
        self.types = TypeLog(self._log_type)

    def _log_type(self, row: dict) -> None:
        now = clock.now()
        self.trace.call(Record(self.stamper.layout.sentinel, kind="type", thread=_thread(), t_start=now,
                               t_end=now, **row))

    def next_callid(self) -> int:
        return self.stamper.next() if self.stamp else self.stamper.layout.sentinel

    def sim_path(self, name: str) -> str | None:
        """The path on the simulated file system of the file ``name`` (:func:`file_name`), or None for
        a file of the real MPI-IO."""
        if self.sysint is None:
            return None
        for mount in self.mounts:
            if name == mount or name.startswith(mount.rstrip("/") + "/"):
                return name
        return None

    def close(self) -> None:
        self._log_group_frees()
        if self.sysint is not None:
            self.sysint.close()
        self.trace.close()

    def _log_group_frees(self) -> None:
        """Log the MPI_Group_free of each group MPI_File_get_group returned that the program freed (an
        ``MPI.Group`` cannot be wrapped unseen, so a free is found when the rank ends: it happened
        between its get_group's end, the row's t_start, and now, its t_end)."""
        for group, size, gid, t0 in self.groups:
            if group == MPI.GROUP_NULL:
                self.trace.call(Record(self.stamper.layout.sentinel, kind="mpi", func=traced_comm.GROUP_FREE,
                                       collective=False, comm_size=size, comm_id=gid, t_start=t0,
                                       t_end=clock.now()))
        self.groups.clear()


def file_name(filename: Any) -> str:
    """The one spelling of a file a program names (callid_core.filenames), as the log keeps it."""
    return canonical(os.fsdecode(filename), os.getcwd())


_tracer: Tracer | None = None
#: Python functions of the error handlers made by ``TracedFile.Create_errhandler``, by handle:
#: MPI cannot call them for simulated files (they have no MPI handle), so ``_call`` does.
_ERRHANDLER_FNS: dict[int, Any] = {}


#: the rank's threads that made traced calls, by their ident: 0 the one that installed the tracer (it
#: initialized MPI), then 1, 2, ... in the order of their first call
_threads: dict[int, int] = {}
_threads_lock = threading.Lock()


def _thread() -> int:
    """The calling thread's number (see :data:`_threads`)."""
    ident = threading.get_ident()
    number = _threads.get(ident)
    if number is None:
        with _threads_lock:
            number = _threads.setdefault(ident, len(_threads))
    return number


def install(tracer: Tracer) -> None:
    """Make :class:`TracedFile` the ``MPI.File`` of the running program, and trace the collectives of
    ``MPI.COMM_WORLD`` and the communicators made from it (:mod:`callid.mpiio.comm`)."""
    global _tracer
    _tracer = tracer
    _threads.clear()
    _thread()  # (this thread: 0)
    MPI.File = TracedFile
    traced_comm.install(_mpi_call, tracer.rids, tracer.types.ids, _nested_call if tracer.nested else None)


def uninstall() -> None:
    global _tracer
    traced_comm.uninstall()
    MPI.File = _BaseFile
    if _tracer is not None:
        _tracer.close()
    _tracer = None


def _mpi_call(func: str, comm_size: int, comm_id: int, t0: int, collective: bool, details: dict) -> None:
    """Log an MPI call without I/O (e.g. MPI_Barrier, MPI_Send) that began at ``t0`` and ends now;
    ``details``: its peer, tag, root, count, datatype and size (those it has)."""
    tr = _tracer
    if tr is not None and tr.mpi:
        _log_without_io(tr, tr.stamper.layout.sentinel, "mpi", func, comm_size, comm_id, t0, collective,
                        details)


#: the traced call each thread is in (its CallID): the MPI calls callid's MPI-IO makes in it are nested in it
_inside = threading.local()


def _nested_call(func: str, comm_size: int, comm_id: int, t0: int, collective: bool, details: dict) -> None:
    """Log an MPI call that callid's MPI-IO made inside the thread's traced call (kind 'nested')."""
    tr = _tracer
    if tr is not None:
        callid = getattr(_inside, "callid", tr.stamper.layout.sentinel)  # (a thread of no call yet: none)
        _log_without_io(tr, callid, "nested", func, comm_size, comm_id, t0, collective,
                        details | {"depth": 1})


def _log_without_io(tr: Tracer, callid: int, kind: str, func: str, comm_size: int, comm_id: int, t0: int,
                    collective: bool, details: dict) -> None:
    """Log one MPI call without I/O that began at ``t0`` and ends now (kind 'mpi' or 'nested')."""
    tr.trace.call(Record(callid, kind=kind, func=func, collective=collective, comm_size=comm_size,
                         comm_id=comm_id, t_start=t0, t_end=clock.now(), thread=_thread(), **details))


def _call(fh: TracedFile | None, name: str, *args: Any, **kwargs: Any) -> Any:
    """Run one ``MPI.File`` method with tracing: stamp, dispatch, log."""
    tr = _tracer
    if tr is None:  # not installed: behave as the library does
        target = getattr(_BaseFile, name)
        return target(fh, *args, **kwargs) if fh is not None else target(*args, **kwargs)
    spec = SPECS[name]
    rec = Record(tr.next_callid(), func=spec.func, collective=spec.collective, thread=_thread())
    if spec.describe is not None:
        spec.describe(rec, args)
    rec.type_ids = _type_ids(tr, name, spec, args, kwargs)
    if fh is not None:
        rec.file, rec.fid = fh._callid_name, fh._callid_fid
        if fh._callid_pending:
            _completed_elsewhere(fh)
        if spec.collective:
            rec.coll_seq = fh._callid_coll_seq()
            rec.comm_size, rec.comm_id = fh._callid_comm
    error = None
    if tr.straggle_s:  # (late to the call: outside its time, as a rank slowed by its computation)
        time.sleep(tr.straggle_s)
    t0 = clock.now()
    _inside.callid = rec.callid
    try:
        if name == "Open":
            return _open(tr, rec, *args, **kwargs)
        if name == "Delete":
            return _delete(tr, rec, *args, **kwargs)
        if fh._sim is not None:
            return _sim(tr, fh._sim, name, spec, rec, args, kwargs)
        return _real(fh, name, spec, rec, args, kwargs)
    except BaseException as exc:
        error = error_text(exc)
        if spec.position == "at" and spec.mode != "end" and rec.offset is None:
            passed = args[0] if args else kwargs.get("offset")  # (e.g. a negative one: logged as passed)
            rec.offset = passed if isinstance(passed, int) else None
        if isinstance(exc, MPI.Exception) and fh is not None and fh._sim is not None:
            _sim_error(tr, fh, exc.Get_error_code())
        raise
    finally:
        rec.t_start, rec.t_end, rec.error = t0, clock.now(), error
        tr.trace.call(rec)


def _type_ids(tr: Tracer, name: str, spec: CallSpec, args: tuple, kwargs: dict) -> list[int]:
    """The rank's ids of the datatypes a call passes (most pass none: no lookup)."""
    types = _types_of(name, spec, args, kwargs)
    return tr.types.ids(*types) if types else []


def _types_of(name: str, spec: CallSpec, args: tuple, kwargs: dict) -> list[Any]:
    """The datatypes a call passes: a data access's buffer's, set_view's etype and filetype."""
    if name == "Set_view":
        return [args[1], args[2] if args[2] is not None else args[1]]
    if spec.access is None:
        return []
    try:
        return [buffer_spec(_split_args(spec, args, dict(kwargs))[1])[2]]
    except (TypeError, ValueError):  # (not bytes-like: described by its bytes alone)
        return []


def _open(tr: Tracer, rec: Record, cls: type, comm: MPI.Intracomm, filename: Any,
          amode: int = MPI.MODE_RDONLY, info: MPI.Info = MPI.INFO_NULL) -> TracedFile:
    rec.file = file_name(filename)
    rec.fid = next(tr.fids)
    path = tr.sim_path(rec.file)
    passed = info
    if path is not None and tr.system_hints:  # (ROMIO's hints file, as ROMIO reads it for its own files)
        info = _with_system_hints(info, tr.system_hints)
    rec.amode, rec.hints = amode_text(amode), hints_text(info)
    comm = traced_comm.untraced(comm)  # (the open's own collectives are not the program's)
    rec.comm_size, rec.comm_id = ident = traced_comm.ident(comm)
    # The ranks of the open agree on a base, so each collective call on this file has one
    # coll_seq on every rank: (root's world rank, its open count) << 20 | calls on the file.
    base = comm.bcast((MPI.COMM_WORLD.Get_rank() << 20 | next(tr.opens) & 0xFFFFF)
                      if comm.Get_rank() == 0 else None, root=0)
    rec.coll_seq = base << 20
    if path is None:
        fh = super(TracedFile, cls).Open(comm, filename, amode, info)
        rec.file_size = _BaseFile.Get_size(fh)
    else:
        fh = cls()
        try:  # (the MPI calls the file's make are the calls' nested ones: logged when the run logs them)
            fh._sim = SimFile.open(tr.sysint, rec, traced_comm.nested(comm) if tr.nested else comm, path,
                                   amode, info)
        finally:
            if info is not passed:
                info.Free()
    fh._callid_name, fh._callid_fid, fh._callid_comm = rec.file, rec.fid, ident
    fh._callid_pending = []
    fh._callid_colls = itertools.count(rec.coll_seq + 1)
    return fh


def _delete(tr: Tracer, rec: Record, cls: type, filename: Any, info: MPI.Info = MPI.INFO_NULL) -> None:
    rec.file = file_name(filename)
    path = tr.sim_path(rec.file)
    if path is None:
        return super(TracedFile, cls).Delete(filename, info)
    return SimFile.delete(tr.sysint, rec, path)


def _sim_error(tr: Tracer, fh: TracedFile, code: int) -> None:
    """Invoke a simulated file's error handler, as MPI does before returning the error."""
    sim = fh._sim
    fn = _ERRHANDLER_FNS.get(sim.errhandler.handle)
    if fn is not None:
        fn(fh, code)
    elif sim.fatal_errors():
        tr.close()
        MPI.COMM_WORLD.Abort(code)


def _split_args(spec: CallSpec, args: tuple, kwargs: dict) -> tuple[int | None, Any, MPI.Status | None]:
    """``(offset, buf, status)`` of a data-access call's arguments."""
    args = list(args)
    offset = (kwargs.pop("offset", None) if not args else args.pop(0)) if spec.position == "at" else None
    buf = kwargs.pop("buf", None) if not args else args.pop(0)
    status = kwargs.pop("status", None) if not args else args.pop(0)
    return offset, buf, status


def _sim(tr: Tracer, sim: SimFile, name: str, spec: CallSpec, rec: Record, args: tuple,
         kwargs: dict) -> Any:
    """A call on the simulated file system."""
    if spec.access is None:
        return getattr(sim, name)(rec, *args, **kwargs)
    if spec.mode == "end":
        status = kwargs.get("status", args[1] if len(args) > 1 else None)
        pending, sim.split = sim.split, None
        if pending is None or pending[0] != name[: -len("_end")]:
            raise SimIOError(MPI.ERR_OTHER, f"{spec.func} without a matching _begin")
        _, rec.bytes, rec.rid = pending  # (the standard asks for the same buffer; not checked)
        _set_status(status, rec.bytes)
        return None
    offset, buf, status = _split_args(spec, args, kwargs)
    if spec.mode == "begin" and sim.split is not None:
        raise SimIOError(MPI.ERR_OTHER, "a split collective is already active on this file")
    io_type = P.IoType.READ if spec.access == "read" else P.IoType.WRITE
    done = sim.access(rec, io_type, spec.position, buf, offset, spec.collective)
    if spec.mode == "blocking":
        _set_status(status, done)
        return None
    rec.rid = next(tr.rids)
    if spec.mode == "begin":
        sim.split = (name[: -len("_begin")], done, rec.rid)
        return None
    return _completed_request(tr, rec, done)


def _set_status(status: MPI.Status | None, nbytes: int) -> None:
    if status is not None:
        status.Set_elements(MPI.BYTE, nbytes)


def _log_wait(tr: Tracer, rec: Record, nbytes: int | None) -> None:
    """Log the completion of the non-blocking call ``rec`` (kind 'wait', its CallID and rid)."""
    now = clock.now()
    tr.trace.call(Record(rec.callid, kind="wait", func=rec.func, file=rec.file, fid=rec.fid,
                         offset=rec.offset, size=rec.size, count=rec.count, datatype=rec.datatype,
                         bytes=nbytes, collective=False, rid=rec.rid, t_start=now, t_end=now))


def _completed_request(tr: Tracer, rec: Record, nbytes: int) -> MPI.Grequest:
    """A real (generalized) request for I/O already done; its completion is logged when waited for."""

    def query(status: MPI.Status) -> None:
        _set_status(status, nbytes)
        _log_wait(tr, rec, nbytes)

    request = MPI.Grequest.Start(query)
    request.Complete()
    return request


class _RealRequest(MPI.Request):
    """The request of a non-blocking call on the real MPI-IO: its completion is logged when it is
    waited for, or tested complete, through this object; one completed otherwise (``Waitall`` of a
    list: MPI does not call back) is logged at the next call on its file, when callid sees its
    handle is null (that row's time is then an upper bound)."""

    _callid_done: Callable[[int | None], None] | None = None  # logs the completion (the bytes moved)

    def _callid_complete(self, nbytes: int | None) -> None:
        done, self._callid_done = self._callid_done, None
        if done is not None:
            done(nbytes)

    def Wait(self, status: MPI.Status | None = None) -> bool:
        status = status if status is not None else MPI.Status()
        super().Wait(status)
        self._callid_complete(status.Get_count(MPI.BYTE))
        return True

    def Test(self, status: MPI.Status | None = None) -> bool:
        status = status if status is not None else MPI.Status()
        flag = super().Test(status)
        if flag:
            self._callid_complete(status.Get_count(MPI.BYTE))
        return flag


def _real_request(tr: Tracer, fh: TracedFile, rec: Record, request: MPI.Request) -> _RealRequest:
    rec.rid = next(tr.rids)
    traced = _RealRequest(request)
    traced._callid_done = lambda nbytes: _log_wait(tr, rec, nbytes)
    fh._callid_pending.append(traced)
    return traced


def _completed_elsewhere(fh: TracedFile) -> None:
    """Log the real requests of ``fh`` that MPI completed without this object (e.g. by ``Waitall``)."""
    pending = []
    for request in fh._callid_pending:
        if request._callid_done is None:
            continue
        if request == MPI.REQUEST_NULL:
            request._callid_complete(None)  # (its bytes are not known any more)
        else:
            pending.append(request)
    fh._callid_pending = pending


def _real(fh: TracedFile, name: str, spec: CallSpec, rec: Record, args: tuple, kwargs: dict) -> Any:
    """Run a method of the real MPI-IO and describe it."""
    method = getattr(_BaseFile, name)
    if name in ("Seek", "Seek_shared"):  # (offset: where the pointer moved, in bytes)
        method(fh, *args, **kwargs)
        position = (_BaseFile.Get_position if name == "Seek" else _BaseFile.Get_position_shared)(fh)
        rec.offset = _BaseFile.Get_byte_offset(fh, position)
        return None
    if spec.access is None or spec.mode == "end":
        return method(fh, *args, **kwargs)
    offset, buf, status = _split_args(spec, args, dict(kwargs))
    try:
        _view, rec.count, dtype = buffer_spec(buf)
        rec.datatype = type_name(dtype)
        rec.size = rec.count * dtype.Get_size()
        if not dtype.is_predefined and overlapping(flatten(dtype), rec.count):
            rec.type_issues = "overlapping"
    except TypeError:  # a buffer that is not bytes-like: described by its bytes once transferred
        pass
    try:
        if spec.position == "at":
            position = offset
        elif spec.position == "ind":
            position = _BaseFile.Get_position(fh)
        else:
            position = _BaseFile.Get_position_shared(fh)
        rec.offset = _BaseFile.Get_byte_offset(fh, position)
    except MPI.Exception:
        rec.offset = None
    if spec.mode == "nonblocking":
        return _real_request(_tracer, fh, rec, method(fh, *args, **kwargs))
    if spec.mode != "blocking":
        return method(fh, *args, **kwargs)
    status = status if status is not None else MPI.Status()
    call_args = ([offset] if spec.position == "at" else []) + [buf, status]
    result = method(fh, *call_args)
    rec.bytes = status.Get_count(MPI.BYTE)
    return result


def _data_method(name: str) -> Any:
    def method(self: TracedFile, *args: Any, **kwargs: Any) -> Any:
        return _call(self, name, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"{SPECS[name].func} (traced)."
    return method


class TracedFile(MPI.File):
    """``MPI.File`` whose calls are stamped with CallIDs and logged.

    The data-access methods (``Read_at``, ``Iwrite_all``, ``Write_ordered_begin``, ...)
    are generated from :data:`SPECS` below the class.
    """

    _sim: SimFile | None = None
    _callid_name: str | None = None
    _callid_fid: int | None = None
    _callid_colls: Iterator[int] | None = None
    _callid_comm: tuple[int, int] = (0, 0)  # (size, id) of the communicator it was opened on
    _callid_pending: list[_RealRequest] = []  # (real MPI-IO) requests not seen complete; set per file

    def _callid_coll_seq(self) -> int | None:
        return next(self._callid_colls) if self._callid_colls is not None else None

    def __bool__(self) -> bool:
        return self._sim is not None and not self._sim.closed or super().__bool__()

    def _callid_open_sim(self) -> bool:
        return self._sim is not None and not self._sim.closed

    def __eq__(self, other: object) -> bool:
        # An open simulated file has no MPI handle (it would equal MPI.FILE_NULL): it equals itself only.
        if self._callid_open_sim() or (isinstance(other, TracedFile) and other._callid_open_sim()):
            return self is other
        return super().__eq__(other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = MPI.File.__hash__

    def __reduce__(self) -> Any:
        if self._sim is not None and not self._sim.closed:
            raise ValueError("cannot serialize an open MPI.File")
        return super().__reduce__()

    @classmethod
    def Open(cls, comm: MPI.Intracomm, filename: Any, amode: int = MPI.MODE_RDONLY,
             info: MPI.Info = MPI.INFO_NULL) -> TracedFile:
        """Open a file (collective)."""
        return _call(None, "Open", cls, comm, filename, amode, info)

    @classmethod
    def Delete(cls, filename: Any, info: MPI.Info = MPI.INFO_NULL) -> None:
        """Delete a file."""
        return _call(None, "Delete", cls, filename, info)

    def Close(self) -> None:
        """Close the file (collective)."""
        return _call(self, "Close")

    def Set_size(self, size: int) -> None:
        """Truncate or extend the file (collective)."""
        return _call(self, "Set_size", size)

    def Preallocate(self, size: int) -> None:
        """Make the file at least ``size`` bytes (collective)."""
        return _call(self, "Preallocate", size)

    def Get_size(self) -> int:
        """The file size in bytes."""
        return _call(self, "Get_size")

    def Get_group(self) -> MPI.Group:
        """The group of the communicator that opened the file (whether it was freed is logged: F104)."""
        group = _call(self, "Get_group")
        if _tracer is not None:
            _tracer.groups.append((group, *traced_comm.group_ident(group), clock.now()))
        return group

    def Get_amode(self) -> int:
        """The access mode the file was opened with."""
        return _call(self, "Get_amode")

    def Set_info(self, info: MPI.Info) -> None:
        """Set hints (collective)."""
        return _call(self, "Set_info", info)

    def Get_info(self) -> MPI.Info:
        """The hints in effect."""
        return _call(self, "Get_info")

    def Sync(self) -> None:
        """Flush written data to storage (collective)."""
        return _call(self, "Sync")

    def Set_atomicity(self, flag: bool) -> None:
        """Set atomic mode (collective)."""
        return _call(self, "Set_atomicity", flag)

    def Get_atomicity(self) -> bool:
        """Whether atomic mode is on."""
        return _call(self, "Get_atomicity")

    def Set_view(self, disp: int = 0, etype: MPI.Datatype = MPI.BYTE, filetype: MPI.Datatype | None = None,
                 datarep: str = "native", info: MPI.Info = MPI.INFO_NULL) -> None:
        """Set the file view (collective)."""
        return _call(self, "Set_view", disp, etype, filetype, datarep, info)

    def Get_view(self) -> tuple[int, MPI.Datatype, MPI.Datatype, str]:
        """``(disp, etype, filetype, datarep)``."""
        return _call(self, "Get_view")

    def Seek(self, offset: int, whence: int = MPI.SEEK_SET) -> None:
        """Move the individual file pointer (in etypes)."""
        return _call(self, "Seek", offset, whence)

    def Seek_shared(self, offset: int, whence: int = MPI.SEEK_SET) -> None:
        """Move the shared file pointer (collective)."""
        return _call(self, "Seek_shared", offset, whence)

    def Get_position(self) -> int:
        """The individual file pointer, in etypes."""
        return _call(self, "Get_position")

    def Get_position_shared(self) -> int:
        """The shared file pointer, in etypes."""
        return _call(self, "Get_position_shared")

    def Get_byte_offset(self, offset: int) -> int:
        """Absolute byte offset of a view-relative offset."""
        return _call(self, "Get_byte_offset", offset)

    def Get_type_extent(self, datatype: MPI.Datatype) -> int:
        """Extent of ``datatype`` in the file's data representation."""
        return _call(self, "Get_type_extent", datatype)

    def Get_errhandler(self) -> MPI.Errhandler:
        """The file's error handler."""
        return _call(self, "Get_errhandler")

    def Set_errhandler(self, errhandler: MPI.Errhandler) -> None:
        """Set the file's error handler."""
        return _call(self, "Set_errhandler", errhandler)

    @classmethod
    def Create_errhandler(cls, errhandler_fn: Any) -> MPI.Errhandler:
        """Create an error handler for files (remembered, so simulated files can call it)."""
        errhandler = super().Create_errhandler(errhandler_fn)
        _ERRHANDLER_FNS[errhandler.handle] = errhandler_fn
        return errhandler

    def Call_errhandler(self, errorcode: int) -> None:
        """Invoke the file's error handler with ``errorcode``."""
        if self._sim is None or _tracer is None:
            return super().Call_errhandler(errorcode)
        _sim_error(_tracer, self, errorcode)
        return None

    amode = property(lambda self: self.Get_amode(), doc="Access mode.")
    atomicity = property(lambda self: self.Get_atomicity(), lambda self, f: self.Set_atomicity(f),
                         doc="Atomic mode.")
    group = property(lambda self: self.Get_group(), doc="Group of the file.")
    group_size = property(lambda self: self.Get_group().Get_size(), doc="Size of the file's group.")
    group_rank = property(lambda self: self.Get_group().Get_rank(), doc="Rank in the file's group.")
    info = property(lambda self: self.Get_info(), lambda self, i: self.Set_info(i), doc="Hints.")
    size = property(lambda self: self.Get_size(), doc="Size in bytes.")


for _name, _spec in SPECS.items():
    if _spec.access is not None:
        setattr(TracedFile, _name, _data_method(_name))
