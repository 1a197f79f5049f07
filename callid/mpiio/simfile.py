"""MPI-IO semantics of one open file on the simulated file system.

Collective calls that change the file (open/create, set_size, preallocate,
sync, seek_shared, set_view) are done by rank 0 of the file's communicator and
the outcome is broadcast, as ROMIO's PVFS2 driver does.  Data access goes
through the file view (positions in etypes) and list I/O; shared file pointers
live on the metadata server.  Errors are ``MPI.Exception`` with the class the
standard asks for.
"""

from __future__ import annotations

from typing import Any

from mpi4py import MPI

from callid.mpiio.call import CallContext
from callid.mpiio.collective import CbHints, TwoPhase
from callid.mpiio.datarep import DATAREPS, Conversion, UnsupportedType
from callid.mpiio.datatypes import Runs, buffer_spec, committed, flatten, overlapping, type_name
from callid.mpiio.errors import SimIOError
from callid.mpiio.record import Record
from callid.mpiio.sysint import FileAttrs, FsError, SysInt
from callid.mpiio.view import View
from callid_core.config import MAX_STRIP_SIZE, MIN_STRIP_SIZE, host_of
from server_sim import protocol as P

_ERROR_CLASSES = {
    P.Status.ENOENT: MPI.ERR_NO_SUCH_FILE,
    P.Status.EEXIST: MPI.ERR_FILE_EXISTS,
    P.Status.ENOSPC: MPI.ERR_NO_SPACE,
}


def _error_of(exc: FsError) -> tuple[int, str, bool]:
    """The arguments of the :class:`SimIOError` of ``exc`` (to raise here, or on other ranks)."""
    return _ERROR_CLASSES.get(exc.status, MPI.ERR_IO), str(exc), exc.fs_failed


def _mpi_error(exc: FsError) -> SimIOError:
    return SimIOError(*_error_of(exc))


_SELF_TAG = 32767  # tag of the self-messages that move data of exotic buffers


class Stream:
    """The data of one access in typemap order: the buffer itself when contiguous, else a copy.

    Buffers that are not bytes-like (DLPack, CUDA array interface, ...) are copied
    by MPI itself, through a message to self, so every buffer mpi4py accepts works.
    """

    def __init__(self, buf: Any, io_type: P.IoType) -> None:
        self.spec = buf
        try:
            raw, self.count, self.dtype = buffer_spec(buf)
        except TypeError:  # not bytes-like: let MPI pack it
            self._via_mpi(buf, io_type)
            return
        if io_type == P.IoType.READ and raw.readonly:
            raise SimIOError(MPI.ERR_BUFFER, "read into a read-only buffer")
        if not committed(self.dtype):  # (as MPICH refuses it)
            raise SimIOError(MPI.ERR_TYPE, "the buffer's datatype has not been committed (MPI_Type_commit)")
        flat = flatten(self.dtype)
        self.overlapping = not flat.contiguous and overlapping(flat, self.count)
        self.nbytes = self.count * flat.size
        self.runs = flat.tile(self.count)
        if any(off < 0 or off + n > raw.nbytes for off, n in self.runs):
            raise ValueError(f"message: buffer of {raw.nbytes} bytes is too small for "
                             f"{self.count} x {self.dtype.Get_name() or 'derived type'}")
        self.raw = raw
        self.direct = len(self.runs) <= 1
        start = self.runs[0][0] if self.runs else 0
        self.data = raw[start:start + self.nbytes] if self.direct else memoryview(bytearray(self.nbytes))

    def _via_mpi(self, buf: Any, io_type: P.IoType) -> None:
        comm = MPI.COMM_SELF
        request = comm.Isend(buf, 0, _SELF_TAG)
        status = MPI.Status()
        comm.Probe(0, _SELF_TAG, status)
        self.nbytes = status.Get_count(MPI.BYTE)
        packed = bytearray(self.nbytes)
        comm.Recv([packed, MPI.BYTE], 0, _SELF_TAG)
        request.Wait()
        self.dtype = buf[-1] if isinstance(buf, (list, tuple)) and isinstance(buf[-1], MPI.Datatype) \
            else MPI.BYTE
        size = self.dtype.Get_size()
        self.count = self.nbytes // size if size else 0
        self.direct, self.raw, self.runs, self.overlapping = False, None, None, False
        self.data = memoryview(packed if io_type == P.IoType.WRITE else bytearray(self.nbytes))

    def gather(self) -> memoryview:
        """For writes: the data to send."""
        if not self.direct and self.runs is not None:
            pos = 0
            for off, n in self.runs:
                self.data[pos:pos + n] = self.raw[off:off + n]
                pos += n
        return self.data

    def scatter(self, done: int) -> None:
        """For reads: put the first ``done`` bytes read where the datatype says."""
        if self.direct:
            return
        if self.runs is None:
            MPI.COMM_SELF.Sendrecv([self.data[:done], MPI.BYTE], 0, _SELF_TAG, self.spec, 0, _SELF_TAG)
            return
        pos = 0
        for off, n in self.runs:
            if pos >= done:
                break
            k = min(n, done - pos)
            self.raw[off:off + k] = self.data[pos:pos + k]
            pos += n


class SimFile:
    """State of one open file on the simulated file system."""

    def __init__(self, sysint: SysInt, comm: MPI.Intracomm, attrs: FileAttrs, amode: int,
                 info: dict[str, str]) -> None:
        self.sysint = sysint
        self.comm = comm
        self.attrs = attrs
        self.amode = amode
        self.info = info
        self.view = View()
        self.position = 0
        self.atomicity = False
        self.closed = False
        self.split: tuple[str, int, int] | None = None  # an active split collective: (name, bytes, rid)
        self._world_ranks = comm.allgather(MPI.COMM_WORLD.Get_rank())  # (the open is collective)
        self.errhandler = MPI.FILE_NULL.Get_errhandler()

    # -- helpers ------------------------------------------------------------------------
    def _fs(self, fn, *args) -> Any:
        try:
            return fn(*args)
        except FsError as exc:
            raise _mpi_error(exc) from None

    def _rank0(self, fn) -> Any:
        """Run ``fn`` on rank 0 of the file's communicator and broadcast its outcome."""
        outcome: tuple[str, Any] = ("", None)
        if self.comm.Get_rank() == 0:
            try:
                outcome = ("ok", fn())
            except FsError as exc:
                outcome = ("error", _error_of(exc))
            except MPI.Exception as exc:
                outcome = ("error", (exc.Get_error_class(), str(exc), getattr(exc, "fs_failed", False)))
        outcome = self.comm.bcast(outcome, root=0)
        if outcome[0] == "error":
            raise SimIOError(*outcome[1])
        return outcome[1]

    def _check_open(self) -> None:
        if self.closed:
            raise SimIOError(MPI.ERR_FILE, "file is closed")

    def fatal_errors(self) -> bool:
        """True when the file's error handler aborts instead of returning errors."""
        return self.errhandler in (MPI.ERRORS_ARE_FATAL, getattr(MPI, "ERRORS_ABORT", None))

    # -- file manipulation ------------------------------------------------------------
    @classmethod
    def open(cls, sysint: SysInt, rec: Record, comm: MPI.Intracomm, path: str, amode: int,
             info: MPI.Info) -> SimFile:
        """Collective open: rank 0 looks up (and creates) the file and asks its size (``rec.file_size``;
        0 without asking for a file the open created), everyone gets its layout and size."""
        _check_amode(amode)
        hints = {} if info == MPI.INFO_NULL else {k: info.Get(k) for k in info.keys()}
        outcome: tuple[str, Any] = ("", None)
        if comm.Get_rank() == 0:
            try:
                attrs = _lookup_or_create(sysint, rec, path, amode, hints)
                size = 0 if attrs.created else sysint.getsize(attrs, CallContext.of(rec))
                outcome = ("ok", (attrs, size))
            except FsError as exc:
                outcome = ("error", _error_of(exc))
        outcome = comm.bcast(outcome, root=0)
        if outcome[0] == "error":
            raise SimIOError(*outcome[1])
        attrs, rec.file_size = outcome[1]
        f = cls(sysint, comm, attrs, amode, hints)
        if amode & MPI.MODE_APPEND:
            call = CallContext.of(rec)
            f.position = f.view.position_of(f._fs(sysint.getsize, f.attrs, call))
            f._rank0(lambda: sysint.shared_fp(f.attrs, f.position, call, True))
        return f

    @staticmethod
    def delete(sysint: SysInt, rec: Record, path: str) -> None:
        try:
            sysint.remove(path, CallContext.of(rec))
        except FsError as exc:
            raise _mpi_error(exc) from None

    def Close(self, rec: Record) -> None:
        self._check_open()
        self.comm.Barrier()
        if self.amode & MPI.MODE_DELETE_ON_CLOSE:
            self._rank0(lambda: self.sysint.remove(self.attrs.path, CallContext.of(rec)))
        self.closed = True
        self.view.free()

    def _check_resize(self, rec: Record, size: int) -> None:
        self._check_open()
        if size < 0:
            raise SimIOError(MPI.ERR_ARG, f"negative size {size}")
        if self.amode & MPI.MODE_RDONLY:
            raise SimIOError(MPI.ERR_READ_ONLY, "file opened read-only")

    def Set_size(self, rec: Record, size: int) -> None:
        self._check_resize(rec, size)
        self._rank0(lambda: self.sysint.truncate(self.attrs, size, CallContext.of(rec)))

    def Preallocate(self, rec: Record, size: int) -> None:
        self._check_resize(rec, size)

        def grow() -> None:
            call = CallContext.of(rec)
            if self.sysint.getsize(self.attrs, call) < size:
                self.sysint.truncate(self.attrs, size, call)
        self._rank0(grow)

    def Get_size(self, rec: Record) -> int:
        self._check_open()  # (the size it returns is no size it requested: its record's stays null)
        return self._fs(self.sysint.getsize, self.attrs, CallContext.of(rec))

    def Sync(self, rec: Record) -> None:
        self._check_open()
        self._rank0(lambda: self.sysint.flush(self.attrs, CallContext.of(rec)))
        self.comm.Barrier()

    def Get_amode(self, rec: Record) -> int:
        return self.amode

    def Get_group(self, rec: Record) -> MPI.Group:
        return self.comm.Get_group()

    def Set_info(self, rec: Record, info: MPI.Info) -> None:
        if info != MPI.INFO_NULL:
            self.info.update({k: info.Get(k) for k in info.keys()})

    def Get_info(self, rec: Record) -> MPI.Info:
        info = MPI.Info.Create()
        hints = {**self.info, **self.cb_hints().as_info(),
                 "striping_factor": str(len(self.attrs.dfiles)), "striping_unit": str(self.attrs.strip_size)}
        for key, value in hints.items():
            info.Set(key, value)
        return info

    def Set_atomicity(self, rec: Record, flag: bool) -> None:
        self._check_open()
        self.atomicity = bool(flag)
        self.comm.Barrier()

    def Get_atomicity(self, rec: Record) -> bool:
        return self.atomicity

    def Get_errhandler(self, rec: Record) -> MPI.Errhandler:
        return self.errhandler

    def Set_errhandler(self, rec: Record, errhandler: MPI.Errhandler) -> None:
        self.errhandler = errhandler

    # -- views and pointers -------------------------------------------------------------
    def Set_view(self, rec: Record, disp: int = 0, etype: MPI.Datatype = MPI.BYTE,
                 filetype: MPI.Datatype | None = None, datarep: str = "native",
                 info: MPI.Info = MPI.INFO_NULL) -> None:
        self._check_open()
        view, error = None, None
        if datarep not in DATAREPS:
            error = (MPI.ERR_UNSUPPORTED_DATAREP,
                     f"data representation {datarep!r} (one of {', '.join(DATAREPS)})")
        elif not all(committed(t) for t in (etype, filetype) if t is not None):  # (as ROMIO refuses it)
            error = (MPI.ERR_TYPE, "the etype or the filetype has not been committed (MPI_Type_commit)")
        elif datarep == "external32" and (why := _external32_refused(etype, filetype)):
            error = (MPI.ERR_UNSUPPORTED_DATAREP, why)
        elif self.amode & MPI.MODE_SEQUENTIAL and disp != MPI.DISPLACEMENT_CURRENT:  # (ROMIO refuses it)
            error = (MPI.ERR_ARG, "a file opened MODE_SEQUENTIAL takes MPI_DISPLACEMENT_CURRENT as "
                     "displacement")
        else:
            if self.amode & MPI.MODE_SEQUENTIAL:  # (at MPI_DISPLACEMENT_CURRENT)
                disp = self.view.byte_offset(self.position)
            view = View(disp, etype, filetype, datarep)
            if view.ft.size and view.ft.size % view.esize:
                error = (MPI.ERR_ARG, "the filetype is not made of whole etypes")
        # (all ranks fail together, before anything changes: the collectives stay in step)
        errors = [e for e in self.comm.allgather(error) if e is not None]
        if errors:
            if view is not None:
                view.free()
            code, message = error or errors[0]
            raise SimIOError(code, message if error else f"set_view failed on another rank: {message}")
        self.view.free()
        self.view, self.position = view, 0  # (the log keeps the displacement as passed: the tracer's)
        self._rank0(lambda: self.sysint.shared_fp(self.attrs, 0, CallContext.of(rec), True))
        self.Set_info(rec, info)

    def Get_view(self, rec: Record) -> tuple[int, MPI.Datatype, MPI.Datatype, str]:
        return self.view.get()

    def Get_byte_offset(self, rec: Record, offset: int) -> int:
        return self.view.byte_offset(offset)

    def Get_type_extent(self, rec: Record, datatype: MPI.Datatype) -> int:
        return datatype.Get_extent()[1]

    def _seek_target(self, call: CallContext, offset: int, whence: int, current: int) -> int:
        if whence == MPI.SEEK_SET:
            new = offset
        elif whence == MPI.SEEK_CUR:
            new = current + offset
        elif whence == MPI.SEEK_END:
            size = self._fs(self.sysint.getsize, self.attrs, call)
            new = self.view.position_of(size) + offset
        else:
            raise SimIOError(MPI.ERR_ARG, f"bad whence {whence}")
        if new < 0:
            raise SimIOError(MPI.ERR_ARG, f"seek to negative offset {new}")
        return new

    def Seek(self, rec: Record, offset: int, whence: int = MPI.SEEK_SET) -> None:
        self._check_open()
        self.position = self._seek_target(CallContext.of(rec), offset, whence, self.position)
        rec.offset = self.view.byte_offset(self.position)

    def Get_position(self, rec: Record) -> int:
        self._check_open()
        return self.position

    def Seek_shared(self, rec: Record, offset: int, whence: int = MPI.SEEK_SET) -> None:
        self._check_open()
        call = CallContext.of(rec)

        def seek() -> int:
            current = self.sysint.shared_fp(self.attrs, 0, call) if whence == MPI.SEEK_CUR else 0
            new = self._seek_target(call, offset, whence, current)
            self.sysint.shared_fp(self.attrs, new, call, assign=True)
            return new
        rec.offset = self.view.byte_offset(self._rank0(seek))

    def Get_position_shared(self, rec: Record) -> int:
        self._check_open()
        return self._fs(self.sysint.shared_fp, self.attrs, 0, CallContext.of(rec))

    # -- data access --------------------------------------------------------------------
    def _two_phase(self) -> TwoPhase:
        return TwoPhase(self.sysint, self.comm, self.attrs, self.cb_hints(), self._world_ranks,
                        self.sysint.config.ranks_per_host)

    def cb_hints(self) -> CbHints:
        """Collective-buffering hints in effect (defaults: one aggregator per simulated host)."""
        rph = self.sysint.config.ranks_per_host
        return CbHints.from_info(self.info, len({host_of(w, rph) for w in self._world_ranks}))

    def access(self, rec: Record, io_type: P.IoType, where: str, buf: Any,
               offset: int | None = None, collective: bool = False) -> int:
        """Read or write ``buf`` at the position ``where`` says (at, ind, shared, ordered).

        Collective calls go through two-phase collective buffering when the hints
        say so.  Returns the bytes transferred and advances the pointer it used.
        """
        self._check_open()
        self._check_access(io_type, where)
        stream = Stream(buf, io_type)
        esize = self.view.esize
        if stream.nbytes % esize:
            raise SimIOError(MPI.ERR_ARG, f"{stream.nbytes} bytes are not whole etypes of {esize} bytes")
        convert = self._conversion(stream.dtype)
        call = CallContext.of(rec)
        pos = self._access_position(where, offset, stream.nbytes // esize, call)
        regions = self._describe_access(rec, pos, stream)
        done = self._transfer(io_type, regions, stream, call, collective, convert)
        rec.bytes = done
        if where == "ind":
            self.position += done // esize
        return done

    def _check_access(self, io_type: P.IoType, where: str) -> None:
        """Raise if the access mode forbids this direction or ``where`` (explicit offsets)."""
        if io_type == P.IoType.WRITE and self.amode & MPI.MODE_RDONLY:
            raise SimIOError(MPI.ERR_READ_ONLY, "write to a file opened read-only")
        if io_type == P.IoType.READ and self.amode & MPI.MODE_WRONLY:
            raise SimIOError(MPI.ERR_ACCESS, "read from a file opened write-only")
        if where == "at" and self.amode & MPI.MODE_SEQUENTIAL:
            raise SimIOError(MPI.ERR_UNSUPPORTED_OPERATION, "explicit offsets on a MODE_SEQUENTIAL file")

    def _access_position(self, where: str, offset: int | None, n_etypes: int, call: CallContext) -> int:
        """The view position (in etypes) the access starts at; takes ``n_etypes`` of a shared pointer."""
        if where == "at":
            if offset is None or offset < 0:
                raise SimIOError(MPI.ERR_ARG, f"bad offset {offset}")
            return offset
        if where == "ind":
            return self.position
        if where == "shared":
            return self._fs(self.sysint.shared_fp, self.attrs, n_etypes, call)
        # ordered: rank order, one fetch-and-add for the whole group
        before = self.comm.exscan(n_etypes) or 0
        total = self.comm.allreduce(n_etypes)
        return self._rank0(lambda: self.sysint.shared_fp(self.attrs, total, call)) + before

    def _describe_access(self, rec: Record, pos: int, stream: Stream) -> Runs:
        """The file regions of the access at ``pos``; record them and the buffer in ``rec``."""
        regions = self.view.regions(pos, stream.nbytes)
        rec.offset = regions[0][0] if regions else self.view.byte_offset(pos)
        if len(regions) > 1:  # (what a replay needs: callid.replay)
            rec.region_offsets, rec.region_lengths = (list(r) for r in zip(*regions))
        rec.size, rec.count = stream.nbytes, stream.count
        rec.datatype = type_name(stream.dtype)
        rec.type_issues = "overlapping" if stream.overlapping else None
        return regions

    def _conversion(self, dtype: MPI.Datatype) -> Conversion | None:
        """external32: the file holds the data in MPI's portable form, converted on the way, never in the
        buffer (None: another representation, the data as it is)."""
        if self.view.datarep != "external32":
            return None
        try:
            return Conversion(dtype)
        except UnsupportedType as exc:
            raise SimIOError(MPI.ERR_UNSUPPORTED_DATAREP, _external32_refusal(exc)) from None

    def _transfer(self, io_type: P.IoType, regions: Runs, stream: Stream, call: CallContext,
                  collective: bool, convert: Conversion | None) -> int:
        """Move the data, two-phase when collective and the hints say so (converted by ``convert``); the
        bytes transferred."""
        two_phase = self._two_phase() if collective else None
        domains = two_phase.plan(io_type, regions, call) if two_phase else None
        if io_type == P.IoType.WRITE:
            data = convert.apply(stream.gather()) if convert else stream.gather()
            if domains is not None:
                two_phase.write(domains, regions, data, call)
                return stream.nbytes
            return self._fs(self.sysint.io, self.attrs, io_type, regions, data, call)
        if domains is not None:
            done = two_phase.read(domains, regions, stream.data, call)
        else:
            done = self._fs(self.sysint.io, self.attrs, io_type, regions, stream.data, call)
        if convert:
            convert.undo(stream.data[:done], out=stream.data[:done])
        stream.scatter(done)
        return done


def _external32_refused(*dtypes: MPI.Datatype | None) -> str | None:
    """Why these datatypes cannot be stored in external32 here (None: they can)."""
    for dtype in (t for t in dtypes if t is not None):
        try:
            Conversion(dtype)
        except UnsupportedType as exc:
            return _external32_refusal(exc)
    return None


def _external32_refusal(exc: UnsupportedType) -> str:
    return f"external32: {exc} (a view's positions would not be the buffer's bytes)"


def _check_amode(amode: int) -> None:
    modes = [m for m in (MPI.MODE_RDONLY, MPI.MODE_WRONLY, MPI.MODE_RDWR) if amode & m]
    if len(modes) != 1:
        raise SimIOError(MPI.ERR_AMODE, "exactly one of MODE_RDONLY, MODE_WRONLY, MODE_RDWR is required")
    if amode & MPI.MODE_RDONLY and amode & (MPI.MODE_CREATE | MPI.MODE_EXCL):
        raise SimIOError(MPI.ERR_AMODE, "MODE_CREATE/MODE_EXCL with MODE_RDONLY")
    if amode & MPI.MODE_RDWR and amode & MPI.MODE_SEQUENTIAL:
        raise SimIOError(MPI.ERR_AMODE, "MODE_SEQUENTIAL with MODE_RDWR")


def int_hint(hints: dict[str, str], key: str) -> int:
    """A whole-number hint (0: absent or not a number)."""
    try:
        return max(0, int(hints.get(key) or 0))
    except ValueError:
        return 0


def _lookup_or_create(sysint: SysInt, rec: Record, path: str, amode: int,
                      hints: dict[str, str]) -> FileAttrs:
    call = CallContext.of(rec)
    if amode & MPI.MODE_CREATE:
        unit = int_hint(hints, "striping_unit")  # (one the file system cannot use is ignored, as ROMIO does)
        return sysint.create(path, call, dfile_count=int_hint(hints, "striping_factor"),
                             strip_size=unit if MIN_STRIP_SIZE <= unit <= MAX_STRIP_SIZE else 0,
                             exclusive=bool(amode & MPI.MODE_EXCL))
    return sysint.lookup(path, call)
