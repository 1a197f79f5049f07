"""The traced ``MPI.File``: every public method is one line over :func:`_call`.

``_call`` stamps a CallID, runs the call either on the simulated file system
(:class:`SimFile`, for names under a mount prefix) or on the real MPI-IO of the
MPI library, and logs one row with what was asked and what was done.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass
from typing import Any

from mpi4py import MPI

from callid.ids import DEFAULT_LAYOUT, Layout, Stamper
from callid.mpiio.simfile import SimFile, buffer_spec
from callid.mpiio.sysint import SysInt
from callid.trace import ClientTrace
from server_sim.config import Config

_BaseFile = MPI.File  # the library's class, captured before launch replaces MPI.File


@dataclass(frozen=True)
class CallSpec:
    """What the trace needs to know about one ``MPI.File`` method."""

    func: str
    collective: bool = False
    access: str | None = None  # "read" / "write" for data access
    position: str | None = None  # "at": explicit offset argument; "ptr": individual pointer


SPECS: dict[str, CallSpec] = {
    "Open": CallSpec("MPI_File_open", collective=True),
    "Close": CallSpec("MPI_File_close", collective=True),
    "Delete": CallSpec("MPI_File_delete"),
    "Seek": CallSpec("MPI_File_seek"),
    "Get_position": CallSpec("MPI_File_get_position"),
    "Read": CallSpec("MPI_File_read", access="read", position="ptr"),
    "Write": CallSpec("MPI_File_write", access="write", position="ptr"),
    "Read_at": CallSpec("MPI_File_read_at", access="read", position="at"),
    "Write_at": CallSpec("MPI_File_write_at", access="write", position="at"),
    "Set_size": CallSpec("MPI_File_set_size", collective=True),
    "Get_size": CallSpec("MPI_File_get_size"),
    "Sync": CallSpec("MPI_File_sync", collective=True),
    "Get_amode": CallSpec("MPI_File_get_amode"),
}


@dataclass
class Record:
    """What one call asked for and did; filled in by the implementation."""

    callid: int
    file: str | None = None
    fid: int | None = None
    offset: int | None = None
    size: int | None = None
    count: int | None = None
    datatype: str | None = None
    nbytes: int | None = None


class Tracer:
    """The tracing state of one rank: CallIDs, the trace log and the file-system client."""

    def __init__(self, rank: int, trace_dir: str, config: Config | None = None,
                 layout: str = str(DEFAULT_LAYOUT), stamp: bool = True, run_id: str = "") -> None:
        if config is not None:
            layout, stamp, run_id = config.callid_layout, config.callid, config.run_id
        self.stamper = Stamper(rank, Layout.parse(layout))
        self.stamp = stamp
        self.trace = ClientTrace(trace_dir, rank, layout, run_id,
                                 config.to_json() if config else "{}",
                                 flush_rows=config.flush_rows if config else 4096)
        self.sysint = SysInt(config, rank, self.trace.rpc) if config and config.servers else None
        self.mounts = [m.rstrip("/") for m in config.mount] if config else []
        self.fids = itertools.count(1)
        self.coll_seq = itertools.count(1)

    def next_callid(self) -> int:
        return self.stamper.next() if self.stamp else self.stamper.layout.sentinel

    def sim_path(self, filename: Any) -> str | None:
        """The path on the simulated file system, or None for a file of the real MPI-IO."""
        if self.sysint is None:
            return None
        name = os.fsdecode(filename)
        if name.startswith("pvfs2:"):
            name = name[len("pvfs2:"):]
        for mount in self.mounts:
            if name == mount or name.startswith(mount + "/"):
                return os.path.normpath(name)
        return None

    def close(self) -> None:
        if self.sysint is not None:
            self.sysint.close()
        self.trace.close()


_tracer: Tracer | None = None


def install(tracer: Tracer) -> None:
    """Make :class:`TracedFile` the ``MPI.File`` of the running program."""
    global _tracer
    _tracer = tracer
    MPI.File = TracedFile


def uninstall() -> None:
    global _tracer
    MPI.File = _BaseFile
    if _tracer is not None:
        _tracer.close()
    _tracer = None


def _call(fh: TracedFile | None, name: str, *args: Any) -> Any:
    """Run one ``MPI.File`` method with tracing: stamp, dispatch, log."""
    tr = _tracer
    if tr is None:  # not installed: behave as the library does
        return getattr(_BaseFile, name)(fh, *args) if fh is not None else getattr(_BaseFile, name)(*args)
    spec = SPECS[name]
    rec = Record(tr.next_callid())
    if fh is not None:
        rec.file, rec.fid = fh._callid_name, fh._callid_fid
    error = None
    t0 = time.time_ns()
    try:
        if fh is not None and fh._sim is not None:
            return getattr(fh._sim, name)(rec, *args)
        if name == "Open":
            return _open(tr, rec, *args)
        if name == "Delete":
            return _delete(tr, rec, *args)
        return _real(fh, name, spec, rec, args)
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        tr.trace.call(rec.callid, spec.func, rec.file, rec.fid, rec.offset, rec.size, rec.count,
                      rec.datatype, rec.nbytes, spec.collective,
                      next(tr.coll_seq) if spec.collective else None, None,
                      t0, time.time_ns(), error)


def _open(tr: Tracer, rec: Record, cls: type, comm: MPI.Intracomm, filename: Any,
          amode: int, info: MPI.Info) -> TracedFile:
    rec.file = os.fsdecode(filename)
    rec.fid = next(tr.fids)
    path = tr.sim_path(filename)
    if path is None:
        fh = super(TracedFile, cls).Open(comm, filename, amode, info)
    else:
        fh = cls()
        fh._sim = SimFile.open(tr.sysint, rec, comm, path, amode, info)
    fh._callid_name, fh._callid_fid = rec.file, rec.fid
    return fh


def _delete(tr: Tracer, rec: Record, cls: type, filename: Any, info: MPI.Info) -> None:
    rec.file = os.fsdecode(filename)
    path = tr.sim_path(filename)
    if path is None:
        return super(TracedFile, cls).Delete(filename, info)
    return SimFile.delete(tr.sysint, rec, path)


def _real(fh: TracedFile, name: str, spec: CallSpec, rec: Record, args: tuple) -> Any:
    """Run a method of the real MPI-IO and describe it."""
    method = getattr(_BaseFile, name)
    if spec.access is None:
        return method(fh, *args)
    buf_arg = 1 if spec.position == "at" else 0
    _view, rec.count, dtype = buffer_spec(args[buf_arg], spec.access == "read", check_contiguous=False)
    rec.datatype = dtype.Get_name() or "derived"
    rec.size = rec.count * dtype.Get_size()
    position = args[0] if spec.position == "at" else _BaseFile.Get_position(fh)
    rec.offset = _BaseFile.Get_byte_offset(fh, position)
    args = list(args)
    status_at = buf_arg + 1
    if len(args) <= status_at or args[status_at] is None:
        args[status_at:] = [MPI.Status()]
    result = method(fh, *args)
    rec.nbytes = args[status_at].Get_count(MPI.BYTE)
    return result


class TracedFile(MPI.File):
    """``MPI.File`` whose calls are stamped with CallIDs and logged."""

    _sim: SimFile | None = None
    _callid_name: str | None = None
    _callid_fid: int | None = None

    def __bool__(self) -> bool:
        return self._sim is not None or super().__bool__()

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

    def Seek(self, offset: int, whence: int = MPI.SEEK_SET) -> None:
        """Move the individual file pointer."""
        return _call(self, "Seek", offset, whence)

    def Get_position(self) -> int:
        """The individual file pointer, in etype units."""
        return _call(self, "Get_position")

    def Read(self, buf: Any, status: MPI.Status | None = None) -> None:
        """Read at the individual file pointer."""
        return _call(self, "Read", buf, status)

    def Write(self, buf: Any, status: MPI.Status | None = None) -> None:
        """Write at the individual file pointer."""
        return _call(self, "Write", buf, status)

    def Read_at(self, offset: int, buf: Any, status: MPI.Status | None = None) -> None:
        """Read at an explicit offset."""
        return _call(self, "Read_at", offset, buf, status)

    def Write_at(self, offset: int, buf: Any, status: MPI.Status | None = None) -> None:
        """Write at an explicit offset."""
        return _call(self, "Write_at", offset, buf, status)

    def Set_size(self, size: int) -> None:
        """Truncate or extend the file (collective)."""
        return _call(self, "Set_size", size)

    def Get_size(self) -> int:
        """The file size in bytes."""
        return _call(self, "Get_size")

    def Sync(self) -> None:
        """Flush written data to storage (collective)."""
        return _call(self, "Sync")

    def Get_amode(self) -> int:
        """The access mode the file was opened with."""
        return _call(self, "Get_amode")
