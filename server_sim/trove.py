"""Trove: bstreams as real files on local disk (or, for a payload-free file system, their sizes
only), and a transactional metadata store (sqlite3)."""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

Segments = Sequence[tuple[int, int]]
FileRecord = tuple[int, int, list[tuple[str, int]]]  # (handle, strip size, [(server, dfile handle)])


class Trove:
    """Datafile byte streams under ``storage/bstreams``, one real file per handle, made by
    :meth:`create` (the datafiles of a new file); no other operation makes one.

    The files stay open between operations, up to ``max_open`` of them; an operation on another
    handle opens and closes its file (so the descriptors a server holds stay bounded whatever
    handles its clients name)."""

    MAX_OPEN = 256
    #: the file marking a storage whose datafiles are created explicitly; a storage without it (made by
    #: an earlier callid, which created a datafile at its first write) keeps making them that way
    EXPLICIT = "explicit-create"

    def __init__(self, storage: str | os.PathLike[str], max_open: int = MAX_OPEN) -> None:
        self.max_open = max_open
        self.dir = Path(storage) / "bstreams"
        earlier = self.dir.is_dir() and not (self.dir / self.EXPLICIT).exists()
        self.dir.mkdir(parents=True, exist_ok=True)
        if not earlier:
            (self.dir / self.EXPLICIT).touch()
        #: whether a write or truncate makes the datafile it names (a storage of an earlier callid)
        self.implicit = earlier
        self._fds: dict[int, int] = {}
        self._lock = threading.Lock()

    def _path(self, handle: int) -> Path:
        return self.dir / f"{handle:016x}.bstream"

    def _fd(self, handle: int, create: bool) -> tuple[int | None, bool]:
        """The handle's file descriptor (None: no such file) and whether it stays open (else the
        caller closes it)."""
        fd = self._fds.get(handle)  # (the usual case: open already; no lock needed to look)
        if fd is not None:
            return fd, True
        with self._lock:
            fd = self._fds.get(handle)
            if fd is not None:
                return fd, True
            flags = os.O_RDWR | (os.O_CREAT if create else 0)
            try:
                fd = os.open(self._path(handle), flags, 0o644)
            except FileNotFoundError:
                return None, True
            if len(self._fds) < self.max_open:
                self._fds[handle] = fd
                return fd, True
            return fd, False

    @contextmanager
    def _open(self, handle: int, create: bool) -> Iterator[int | None]:
        fd, kept = self._fd(handle, create)
        try:
            yield fd
        finally:
            if not kept:
                os.close(fd)

    #: whether the data operations store and read bytes (:class:`SizeTrove`: sizes only)
    STORES_DATA = True

    def create(self, handle: int) -> None:
        """Make the datafile ``handle`` (empty; one that exists is kept as it is)."""
        with self._open(handle, create=True):
            pass

    def exists(self, handle: int) -> bool:
        """Whether the datafile ``handle`` was created (always, on a storage of an earlier callid)."""
        return self.implicit or handle in self._fds or self._path(handle).exists()

    def write_list(self, handle: int, segments: Segments, data: memoryview) -> int:
        """Write ``data`` to the physical ``segments`` in order (one list operation)."""
        fd, kept = self._fd(handle, create=self.implicit)
        if fd is None:
            raise FileNotFoundError(errno.ENOENT, f"no datafile {handle}")
        try:
            pos = 0
            for off, length in segments:
                chunk = data[pos : pos + length]
                while chunk.nbytes:
                    n = os.pwrite(fd, chunk, off)
                    chunk, off = chunk[n:], off + n
                pos += length
            return pos
        finally:
            if not kept:
                os.close(fd)

    def read_list(self, handle: int, segments: Segments, out: memoryview) -> int:
        """Read the physical ``segments`` into ``out``; bytes past the end read as zeros."""
        fd, kept = self._fd(handle, create=False)
        try:
            pos = got = 0
            for off, length in segments:
                view = out[pos : pos + length]
                n = 0
                if fd is not None:
                    while n < length:
                        k = os.preadv(fd, [view[n:]], off + n)
                        if not k:
                            break
                        n += k
                if n < length:
                    view[n:] = bytes(length - n)
                got += n
                pos += length
            return got
        finally:
            if not kept:
                os.close(fd)

    def size(self, handle: int) -> int:
        with self._open(handle, create=False) as fd:
            return 0 if fd is None else os.fstat(fd).st_size

    def truncate(self, handle: int, size: int) -> None:
        with self._open(handle, create=self.implicit) as fd:
            if fd is None:
                raise FileNotFoundError(errno.ENOENT, f"no datafile {handle}")
            os.ftruncate(fd, size)

    def flush(self, handle: int) -> None:
        with self._open(handle, create=False) as fd:
            if fd is not None:
                os.fsync(fd)

    def remove(self, handle: int) -> bool:
        with self._lock:
            fd = self._fds.pop(handle, None)
        if fd is not None:
            os.close(fd)
        try:
            self._path(handle).unlink()
        except FileNotFoundError:
            return False
        return True

    def close(self) -> None:
        with self._lock:
            fds, self._fds = list(self._fds.values()), {}
        for fd in fds:
            os.close(fd)


class SizeTrove(Trove):
    """The Trove of a payload-free file system (``callid_core.choices.Payload.NONE``): each data
    operation opens its file as :class:`Trove` does, but a write only extends the file sparsely to
    the end of its segments (``ftruncate``: no data blocks) and a read only counts the bytes the file
    holds; neither touches a buffer (None).  Sizes, and so every answer about them, are those of a
    :class:`Trove` given the same operations."""

    STORES_DATA = False

    def __init__(self, storage: str | os.PathLike[str], max_open: int = Trove.MAX_OPEN) -> None:
        super().__init__(storage, max_open)
        self._grow = threading.Lock()  # (a size is read and set as one step)

    def write_list(self, handle: int, segments: Segments, data: memoryview | None = None) -> int:
        """Extend the file to the end of ``segments`` (never shrink it); the bytes they hold."""
        end = max((off + length for off, length in segments), default=0)
        with self._open(handle, create=self.implicit) as fd, self._grow:
            if fd is None:
                raise FileNotFoundError(errno.ENOENT, f"no datafile {handle}")
            if os.fstat(fd).st_size < end:
                os.ftruncate(fd, end)
        return sum(length for _, length in segments)

    def read_list(self, handle: int, segments: Segments, out: memoryview | None = None) -> int:
        """The bytes of ``segments`` before the file's end (what :meth:`Trove.read_list` reads)."""
        size = self.size(handle)
        return sum(max(0, min(length, size - off)) for off, length in segments)


class MetaStore:
    """The metadata server's namespace: path -> metafile handle and layout, in sqlite3."""

    def __init__(self, storage: str | os.PathLike[str]) -> None:
        Path(storage).mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(Path(storage) / "meta.sqlite", check_same_thread=False,
                                   isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, handle INTEGER NOT NULL,"
                " strip_size INTEGER NOT NULL, dfiles TEXT NOT NULL)"
            )
            self._db.execute("CREATE TABLE IF NOT EXISTS handles (next INTEGER NOT NULL)")
            self._db.execute("CREATE TABLE IF NOT EXISTS shared_fp (handle INTEGER PRIMARY KEY,"
                             " value INTEGER NOT NULL)")
            if self._db.execute("SELECT count(*) FROM handles").fetchone()[0] == 0:
                self._db.execute("INSERT INTO handles VALUES (1048576)")

    def lookup(self, path: str) -> FileRecord | None:
        """``(handle, strip_size, [(server, dfile handle), ...])`` or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT handle, strip_size, dfiles FROM files WHERE path = ?", (path,)
            ).fetchone()
        if row is None:
            return None
        return row[0], row[1], [tuple(d) for d in json.loads(row[2])]

    @contextmanager
    def _transaction(self, synced: bool = True) -> Iterator[sqlite3.Connection]:
        """One write transaction under the lock: committed if the block ends, rolled back if it
        raises (so that one bad request cannot leave the store inside a transaction).  ``synced``: the
        commit is on disk when it returns (a namespace change, as PVFS2's TroveSyncMeta); else it is
        in the WAL file, which survives the server's death but not the machine's."""
        with self._lock:
            if not synced:
                self._db.execute("PRAGMA synchronous=NORMAL")
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            finally:
                if not synced:
                    self._db.execute("PRAGMA synchronous=FULL")

    def create(self, path: str, strip_size: int, servers: list[str]) -> FileRecord | None:
        """Create ``path`` with one datafile on each of ``servers``; None if it exists."""
        with self._transaction() as db:
            if db.execute("SELECT 1 FROM files WHERE path = ?", (path,)).fetchone():
                return None
            first = db.execute("SELECT next FROM handles").fetchone()[0]
            db.execute("UPDATE handles SET next = ?", (first + 1 + len(servers),))
            dfiles = [(srv, first + 1 + i) for i, srv in enumerate(servers)]
            db.execute("INSERT INTO files VALUES (?, ?, ?, ?)", (path, first, strip_size, json.dumps(dfiles)))
        return first, strip_size, dfiles

    def remove(self, path: str) -> list[tuple[str, int]] | None:
        """Remove ``path``; return its datafiles, or None if it does not exist."""
        with self._transaction() as db:
            row = db.execute("SELECT dfiles FROM files WHERE path = ?", (path,)).fetchone()
            if row is not None:
                db.execute("DELETE FROM files WHERE path = ?", (path,))
        return None if row is None else [tuple(d) for d in json.loads(row[0])]

    def shared_fp(self, handle: int, delta: int, assign: bool) -> int:
        """Fetch-and-add (or fetch-and-set) a file's shared file pointer, in one transaction;
        :class:`OverflowError` (nothing changed) if the handle or the new pointer is not an int64.  Not
        synced to disk (as ROMIO's pointer in a hidden file under a lock: an fsync at every shared
        read or write took 15% of mpi4py's I/O tests on the simulated file system)."""
        with self._transaction(synced=False) as db:
            row = db.execute("SELECT value FROM shared_fp WHERE handle = ?", (handle,)).fetchone()
            previous = row[0] if row else 0
            value = delta if assign else previous + delta
            if not (0 <= handle < 1 << 63 and -(1 << 63) <= value < 1 << 63):
                raise OverflowError(f"shared file pointer {value} of handle {handle} is out of range")
            db.execute("INSERT OR REPLACE INTO shared_fp VALUES (?, ?)", (handle, value))
        return previous

    def close(self) -> None:
        with self._lock:
            self._db.close()
