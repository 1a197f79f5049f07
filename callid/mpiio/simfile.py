"""MPI-IO semantics of one open file on the simulated file system.

Collective calls that change the file (open/create, set_size, sync) are done by
rank 0 of the file's communicator and the outcome is broadcast, as ROMIO's
PVFS2 driver does.  Errors are raised as ``MPI.Exception`` with the MPI error
class the standard asks for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mpi4py import MPI

from callid.mpiio.sysint import FileAttrs, FsError, SysInt
from server_sim import protocol as P

if TYPE_CHECKING:
    from callid.mpiio.file import Record

_ERROR_CLASSES = {
    P.Status.ENOENT: MPI.ERR_NO_SUCH_FILE,
    P.Status.EEXIST: MPI.ERR_FILE_EXISTS,
    P.Status.ENOSPC: MPI.ERR_NO_SPACE,
}


class SimIOError(MPI.Exception):
    """``MPI.Exception`` that also says what the file system answered."""

    def __init__(self, error_class: int, detail: str) -> None:
        super().__init__(error_class)
        self.detail = detail

    def __str__(self) -> str:
        return f"{super().__str__()}: {self.detail}"


def _mpi_error(exc: FsError) -> SimIOError:
    return SimIOError(_ERROR_CLASSES.get(exc.status, MPI.ERR_IO), str(exc))


def buffer_spec(buf: Any, writable: bool, check_contiguous: bool = True
                ) -> tuple[memoryview, int, MPI.Datatype]:
    """Resolve ``buf``, ``[buf, datatype]``, ``[buf, count, datatype]`` or
    ``[buf, (count, displ), datatype]`` to ``(bytes view, count, datatype)``."""
    count = displ = None
    dtype = None
    if isinstance(buf, (list, tuple)):
        if len(buf) == 2:
            obj, dtype = buf
        elif len(buf) == 3:
            obj, count, dtype = buf
            if isinstance(count, tuple):
                count, displ = count
        else:
            raise ValueError(f"buffer specification of {len(buf)} items")
    else:
        obj = buf
    view = memoryview(obj)
    if writable and view.readonly:
        raise SimIOError(MPI.ERR_BUFFER, "read into a read-only buffer")
    if dtype is None:
        dtype = getattr(MPI, "_typedict", {}).get(view.format, MPI.BYTE)
    view = view.cast("B") if view.format != "B" or view.ndim != 1 else view
    lb, extent = dtype.Get_extent()
    size = dtype.Get_size()
    if check_contiguous and (lb != 0 or extent != size):
        raise SimIOError(MPI.ERR_TYPE, f"non-contiguous datatype {dtype.Get_name() or 'derived'} "
                                       "is not supported on the simulated file system yet")
    if count is None:
        count = view.nbytes // size if size else 0
    start = (displ or 0) * extent
    if start + count * size > view.nbytes:
        raise ValueError(f"message: buffer of {view.nbytes} bytes is smaller than "
                         f"{count} x {dtype.Get_name()}")
    return view[start:start + count * size], count, dtype


class SimFile:
    """State of one open file on the simulated file system (default view: etype MPI_BYTE)."""

    def __init__(self, sysint: SysInt, comm: MPI.Intracomm, attrs: FileAttrs, amode: int) -> None:
        self.sysint = sysint
        self.comm = comm
        self.attrs = attrs
        self.amode = amode
        self.position = 0
        self.closed = False

    # -- file manipulation ------------------------------------------------------------
    @classmethod
    def open(cls, sysint: SysInt, rec: Record, comm: MPI.Intracomm, path: str, amode: int,
             info: MPI.Info) -> SimFile:
        """Collective open: rank 0 looks up (and creates) the file, everyone gets its layout."""
        _check_amode(amode)
        outcome: tuple[str, Any]
        if comm.Get_rank() == 0:
            try:
                outcome = ("ok", _lookup_or_create(sysint, rec, path, amode, info))
            except FsError as exc:
                outcome = ("error", (_ERROR_CLASSES.get(exc.status, MPI.ERR_IO), str(exc)))
        else:
            outcome = ("", None)
        outcome = comm.bcast(outcome, root=0)
        if outcome[0] == "error":
            raise SimIOError(*outcome[1])
        return cls(sysint, comm, outcome[1], amode)

    @staticmethod
    def delete(sysint: SysInt, rec: Record, path: str) -> None:
        try:
            sysint.remove(path, [rec.callid], "MPI_File_delete")
        except FsError as exc:
            raise _mpi_error(exc) from None

    def _rank0(self, rec: Record, fn) -> Any:
        """Run ``fn`` on rank 0 of the file's communicator and broadcast its outcome."""
        outcome: tuple[str, Any] = ("", None)
        if self.comm.Get_rank() == 0:
            try:
                outcome = ("ok", fn())
            except FsError as exc:
                outcome = ("error", (_ERROR_CLASSES.get(exc.status, MPI.ERR_IO), str(exc)))
        outcome = self.comm.bcast(outcome, root=0)
        if outcome[0] == "error":
            raise SimIOError(*outcome[1])
        return outcome[1]

    def _open_check(self) -> None:
        if self.closed:
            raise SimIOError(MPI.ERR_FILE, "file is closed")

    def Close(self, rec: Record) -> None:
        self._open_check()
        self.closed = True
        self.comm.Barrier()

    def Set_size(self, rec: Record, size: int) -> None:
        self._open_check()
        if size < 0:
            raise SimIOError(MPI.ERR_ARG, f"negative size {size}")
        if self.amode & MPI.MODE_RDONLY:
            raise SimIOError(MPI.ERR_READ_ONLY, "file opened read-only")
        rec.size = size
        self._rank0(rec, lambda: self.sysint.truncate(self.attrs, size, [rec.callid],
                                                       "MPI_File_set_size"))

    def Get_size(self, rec: Record) -> int:
        self._open_check()
        try:
            rec.size = self.sysint.getsize(self.attrs, [rec.callid], "MPI_File_get_size")
        except FsError as exc:
            raise _mpi_error(exc) from None
        return rec.size

    def Sync(self, rec: Record) -> None:
        self._open_check()
        self._rank0(rec, lambda: self.sysint.flush(self.attrs, [rec.callid], "MPI_File_sync"))
        self.comm.Barrier()

    def Get_amode(self, rec: Record) -> int:
        return self.amode

    # -- file pointer -------------------------------------------------------------------
    def Seek(self, rec: Record, offset: int, whence: int = MPI.SEEK_SET) -> None:
        self._open_check()
        if whence == MPI.SEEK_SET:
            new = offset
        elif whence == MPI.SEEK_CUR:
            new = self.position + offset
        elif whence == MPI.SEEK_END:
            new = self.sysint.getsize(self.attrs, [rec.callid], "MPI_File_seek") + offset
        else:
            raise SimIOError(MPI.ERR_ARG, f"bad whence {whence}")
        if new < 0:
            raise SimIOError(MPI.ERR_ARG, f"seek to negative offset {new}")
        rec.offset = self.position = new

    def Get_position(self, rec: Record) -> int:
        self._open_check()
        return self.position

    # -- data access --------------------------------------------------------------------
    def _access(self, rec: Record, io_type: P.IoType, offset: int, buf: Any,
                status: MPI.Status | None, func: str) -> int:
        self._open_check()
        if io_type == P.IoType.WRITE and self.amode & MPI.MODE_RDONLY:
            raise SimIOError(MPI.ERR_READ_ONLY, "write to a file opened read-only")
        if io_type == P.IoType.READ and self.amode & MPI.MODE_WRONLY:
            raise SimIOError(MPI.ERR_ACCESS, "read from a file opened write-only")
        if offset < 0:
            raise SimIOError(MPI.ERR_ARG, f"negative offset {offset}")
        view, count, dtype = buffer_spec(buf, writable=io_type == P.IoType.READ)
        rec.offset, rec.size, rec.count = offset, view.nbytes, count
        rec.datatype = dtype.Get_name() or "derived"
        try:
            done = self.sysint.io(self.attrs, io_type, offset, view, [rec.callid], func)
        except FsError as exc:
            raise _mpi_error(exc) from None
        rec.nbytes = done
        if status is not None:
            size = dtype.Get_size()
            status.Set_elements(dtype, done // size if size else 0)
        return done

    def Read(self, rec: Record, buf: Any, status: MPI.Status | None = None) -> None:
        self.position += self._access(rec, P.IoType.READ, self.position, buf, status, "MPI_File_read")

    def Write(self, rec: Record, buf: Any, status: MPI.Status | None = None) -> None:
        self.position += self._access(rec, P.IoType.WRITE, self.position, buf, status, "MPI_File_write")

    def Read_at(self, rec: Record, offset: int, buf: Any, status: MPI.Status | None = None) -> None:
        self._access(rec, P.IoType.READ, offset, buf, status, "MPI_File_read_at")

    def Write_at(self, rec: Record, offset: int, buf: Any, status: MPI.Status | None = None) -> None:
        self._access(rec, P.IoType.WRITE, offset, buf, status, "MPI_File_write_at")


def _check_amode(amode: int) -> None:
    modes = [m for m in (MPI.MODE_RDONLY, MPI.MODE_WRONLY, MPI.MODE_RDWR) if amode & m]
    if len(modes) != 1:
        raise SimIOError(MPI.ERR_AMODE, "exactly one of MODE_RDONLY, MODE_WRONLY, MODE_RDWR is required")
    if amode & MPI.MODE_RDONLY and amode & (MPI.MODE_CREATE | MPI.MODE_EXCL):
        raise SimIOError(MPI.ERR_AMODE, "MODE_CREATE/MODE_EXCL with MODE_RDONLY")


def _hint(info: MPI.Info, key: str) -> int:
    if info == MPI.INFO_NULL:
        return 0
    value = info.Get(key)
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return 0


def _lookup_or_create(sysint: SysInt, rec: Record, path: str, amode: int, info: MPI.Info) -> FileAttrs:
    func = "MPI_File_open"
    if amode & MPI.MODE_CREATE:
        return sysint.create(path, [rec.callid], func, dfile_count=_hint(info, "striping_factor"),
                             strip_size=_hint(info, "striping_unit"),
                             exclusive=bool(amode & MPI.MODE_EXCL))
    return sysint.lookup(path, [rec.callid], func)
