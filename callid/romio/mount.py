"""The FUSE client: a mount of the simulated file system that any program's I/O reaches.

Each operation the kernel passes on (direct I/O: each ``pwrite`` of the MPI library as it made it, cut
at the mount's largest write) becomes the simulated client's requests (``callid.mpiio.sysint``:
simple_stripe, flows, small I/O, metadata), stamped with the CallIDs of the calling thread's MPI-IO
call (``callid.romio.calls``).  An operation outside any MPI-IO call (``ls``, ``h5dump``, a rank's
plain ``write``) is a call of its own, logged as one (``origin = 'posix'``) with a CallID of its
process: a rank's counts down from the top of its counter range (its MPI-IO calls count up); a process
outside the job is given the next rank after the job's (``--ranks``, then one more per process).

    python -m callid.romio.mount --config FS.json --mountpoint DIR --records PARTS --slots FILE --ranks N
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Any

from callid.mpiio.call import CallContext
from callid.mpiio.sysint import FileAttrs, FsError, SysInt
from callid.romio.calls import NOBODY, Caller, Calls
from callid_core import clock
from callid_core import schema as S
from callid_core.config import Config
from callid_core.ids import Layout
from callid_core.partlog import PartLog
from server_sim import protocol as P

log = logging.getLogger("callid.romio.mount")

#: the largest write the kernel passes on in one operation (as large as Linux allows a FUSE mount)
MAX_WRITE = 1 << 20
#: the file name of the mark the client writes in its records directory once mounted
READY = "fuse.ready"

_row = S.CLIENT.row


def _tgid(tid: int) -> int:
    """The process of thread ``tid`` (itself if it cannot be read)."""
    try:
        with open(f"/proc/{tid}/status") as f:
            for line in f:
                if line.startswith("Tgid:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return tid


class Client:
    """The mount's operations (``mfusepy.Operations``' names and arguments)."""

    use_ns = True

    def __init__(self, fuse: Any, config: Config, prefix: str, calls: Calls, records: Path,
                 ranks: int) -> None:
        self.fuse = fuse  # (mfusepy, imported once libfuse is known to be there)
        self.config = config
        self.prefix = prefix.rstrip("/")
        self.calls = calls
        self.layout = Layout.parse(config.callid_layout)
        meta = S.file_metadata(S.KIND_CLIENT, config.callid_layout, config.run_id, config.to_json())
        self.log = PartLog(S.CLIENT_SCHEMA, records, "client-fuse", meta, config.flush_rows)
        self.records = records
        self._clients: dict[int, SysInt] = {}
        self._files: dict[int, FileAttrs] = {}
        self._fhs = itertools.count(1)
        self.ranks = ranks  # the job's ranks: processes outside it are given the ranks after them
        self._processes: dict[int, int] = {}  # process id -> its rank (a process outside the job)
        self._counters: dict[int, itertools.count] = {}  # rank -> its POSIX calls' counters
        self._lock = threading.Lock()
        self._stop = threading.Event()

    # -- who asks -------------------------------------------------------------------------------
    def _sysint(self, rank: int) -> SysInt:
        with self._lock:
            if rank not in self._clients:
                self._clients[rank] = SysInt(self.config, rank, lambda *a, r=rank: self._rpc(r, *a))
            return self._clients[rank]

    def _rpc(self, rank: int, callids: tuple[int, ...], func: str, server: str, op: str, seq: int,
             t_start: int, t_end: int, t_recv: int | None, t_send: int | None, error: str | None) -> None:
        self.log.append(_row(
            callid=callids[0] if len(callids) == 1 else self.layout.sentinel, rank=rank, clock="host0",
            kind="rpc", func=func, server=server, op=op, req_seq=seq, t_start=t_start, t_end=t_end,
            t_recv=t_recv, t_send=t_send, error=error, callids=list(callids)))

    def _posix_id(self, rank: int, job_rank: bool) -> int:
        """A new CallID of a POSIX call outside MPI-IO of ``rank``."""
        with self._lock:
            counters = self._counters.setdefault(rank, itertools.count(
                self.layout.max_counter, -1) if job_rank else itertools.count(1))
            counter = next(counters)
        return self.layout.pack(rank, counter) if self.config.callid else self.layout.sentinel

    def _outside(self, process: int, caller: Caller) -> tuple[int, bool]:
        """The rank a POSIX call outside MPI-IO is logged under, and whether it is a rank of the job."""
        if caller.rank is not None:
            return caller.rank, True
        with self._lock:
            if process not in self._processes:
                self._processes[process] = min(self.ranks + len(self._processes), self.layout.max_rank)
            return self._processes[process], False

    def _do(self, op: str, path: str, extent: tuple[int, int] | None, fn: Any) -> Any:
        """Run ``fn(sysint, call)`` for the calling thread; a POSIX call outside MPI-IO is logged."""
        tid = self.fuse.fuse_get_context()[2]
        caller = self.calls.caller(tid) if tid else NOBODY
        process = 0
        if caller is None:  # (a thread without a slot: of a rank's process, or of another)
            process = _tgid(tid)
            caller = self.calls.of_process(process)
        sim = self._sim(path)
        call = None
        if caller.callid is not None:
            call = self.calls.context(caller, sim, extent)
        elif caller.rank is not None:
            call = self.calls.pending(caller.rank, sim, extent)
        if call is not None:
            try:
                return fn(self._sysint(caller.rank), call)
            except FsError as exc:
                raise self.fuse.FuseOSError(exc.status) from None
        rank, job_rank = self._outside(process, caller)
        callid = self._posix_id(rank, job_rank)
        t0, error = clock.now(), None
        try:
            return fn(self._sysint(rank), CallContext((callid,), op))
        except FsError as exc:
            error = f"{P.status_name(exc.status)}: {exc}"
            raise self.fuse.FuseOSError(exc.status) from None
        finally:
            self.log.append(_row(
                callid=callid, rank=rank, clock="host0", kind="call", func=op, file=sim,
                offset=extent[0] if extent else None, size=extent[1] if extent else None,
                collective=False, t_start=t0, t_end=clock.now(), error=error, origin="posix"))

    def _sim(self, path: str) -> str:
        return self.prefix + path if path != "/" else self.prefix or "/"

    # -- the operations --------------------------------------------------------------------------
    def init_with_config(self, conn: Any, config: Any) -> None:
        if conn is not None:
            conn.max_write = MAX_WRITE
        if config is not None:
            config.direct_io = 1
        (self.records / READY).write_text(str(MAX_WRITE))

    @property
    def stopped(self) -> bool:
        """Has the mount been taken down (``destroy``)?"""
        return self._stop.is_set()

    def destroy(self, path: str) -> None:
        self._stop.set()
        for client in self._clients.values():
            client.close()
        self.log.close()

    def getattr(self, path: str, fh: int | None = None) -> dict[str, int]:
        now = time.time_ns()
        if path == "/":
            return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2, "st_atime": now, "st_mtime": now,
                    "st_ctime": now}

        def attrs(sysint: SysInt, call: CallContext) -> dict[str, int]:
            f = self._files.get(fh) if fh else None
            f = f or sysint.lookup(self._sim(path), call)
            return {"st_mode": stat.S_IFREG | 0o644, "st_nlink": 1, "st_size": sysint.getsize(f, call),
                    "st_blksize": f.strip_size, "st_atime": now, "st_mtime": now, "st_ctime": now}
        return self._do("stat", path, None, attrs)

    def _handle(self, f: FileAttrs) -> int:
        fh = next(self._fhs)
        self._files[fh] = f
        return fh

    def create(self, path: str, mode: int, flags: int = 0) -> int:
        return self._handle(self._do("open", path, None, lambda sysint, call: sysint.create(
            self._sim(path), call, exclusive=bool(flags & os.O_EXCL))))

    def open(self, path: str, flags: int) -> int:
        def opened(sysint: SysInt, call: CallContext) -> FileAttrs:
            f = sysint.lookup(self._sim(path), call)
            if flags & os.O_TRUNC:
                sysint.truncate(f, 0, call)
            return f
        return self._handle(self._do("open", path, None, opened))

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        f = self._files[fh]
        buf = bytearray(size)

        def read(sysint: SysInt, call: CallContext) -> bytes:
            n = sysint.io(f, P.IoType.READ, [(offset, size)], memoryview(buf), call)
            return bytes(buf[:n])
        return self._do("read", path, (offset, size), read)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        f = self._files[fh]
        return self._do("write", path, (offset, len(data)), lambda sysint, call: sysint.io(
            f, P.IoType.WRITE, [(offset, len(data))], memoryview(data), call))

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        def truncate(sysint: SysInt, call: CallContext) -> int:
            f = self._files.get(fh) if fh else None
            sysint.truncate(f or sysint.lookup(self._sim(path), call), length, call)
            return 0
        return self._do("truncate", path, None, truncate)

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        f = self._files[fh]
        self._do("fsync", path, None, lambda sysint, call: sysint.flush(f, call))
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    def release(self, path: str, fh: int) -> int:
        self._files.pop(fh, None)
        return 0

    def unlink(self, path: str) -> int:
        self._do("unlink", path, None, lambda sysint, call: sysint.remove(self._sim(path), call))
        return 0

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", ".."]

    def statfs(self, path: str) -> dict[str, int]:
        return {"f_bsize": self.config.strip_size, "f_frsize": self.config.strip_size, "f_blocks": 1 << 30,
                "f_bfree": 1 << 30, "f_bavail": 1 << 30, "f_namemax": 255}

    def chmod(self, path: str, mode: int) -> int:
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        return 0

    def utimens(self, path: str, times: Any = None) -> int:
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m callid.romio.mount", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the run's file-system configuration (fs.json)")
    parser.add_argument("--mountpoint", required=True, help="where to mount")
    parser.add_argument("--prefix", help="the path of the mount on the simulated file system "
                        "(default: the mount point)")
    parser.add_argument("--records", required=True, type=Path,
                        help="the directory of the ranks' records, where this client's log goes too")
    parser.add_argument("--slots", required=True, type=Path, help="the slot table of the ranks' threads")
    parser.add_argument("--ranks", required=True, type=int, help="the job's ranks (0 .. N-1)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="callid fuse: %(message)s")
    try:
        import mfusepy
    except OSError as exc:  # (no libfuse3)
        print(f"callid: the FUSE client cannot start: {exc} (install FUSE 3: apt-get install fuse3)",
              file=sys.stderr)
        return 1
    config = Config.load(args.config)
    calls = Calls(args.slots, args.records, Layout.parse(config.callid_layout).sentinel)
    operations = type("CallidFuse", (Client, mfusepy.Operations), {})
    client = operations(mfusepy, config, args.prefix or args.mountpoint, calls, args.records, args.ranks)
    try:
        mfusepy.FUSE(client, args.mountpoint, foreground=True, nothreads=False, fsname="callid")
    except RuntimeError as exc:  # (libfuse's loop ends with an error status when a signal stops it)
        if not client.stopped:
            print(f"callid: the FUSE client failed: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
