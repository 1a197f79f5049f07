"""Reading a Darshan log with PyDarshan's darshan-util, so that a damaged log costs one line, not the command.

darshan-util (C) may abort (SIGABRT) or crash on a damaged or truncated log, and prints its complaints
on the standard error instead of returning them.  :func:`read_in_child` runs a reader in a forked
child process with the standard error captured: a crash, a complaint or an exception of the reader
becomes an :class:`InputError` naming the log.  ``callid replay`` (the DXT traces) and ``callid
insights LOG.darshan`` (the counters) both read logs this way.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import IO, Any, TypeVar

from callid_core.errors import InputError

__all__ = ["MAGIC", "is_darshan_log", "read_in_child"]

#: DARSHAN_MAGIC_NR: the 64-bit number after a log's 8-byte version string
MAGIC = 6567223
T = TypeVar("T")
#: a reader: (PyDarshan's cffi backend, the open log, the log's path) -> what it read (picklable)
Reader = Callable[[Any, dict, str], T]


def is_darshan_log(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a file that starts as a Darshan log does (a version string, then the magic
    number, either byte order); a damaged log may still pass."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError:
        return False
    return len(head) == 16 and head[:2] == b"3." and MAGIC in (int.from_bytes(head[8:], "little"),
                                                                int.from_bytes(head[8:], "big"))


def read_in_child(path: str | os.PathLike[str], read: Reader[T]) -> T:
    """``read(backend, log, path)`` on the Darshan log at ``path``, in a child process (``read`` a
    module-level function); :class:`InputError` if the log is missing, not a Darshan log, or damaged."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file")
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as child:
        try:
            return child.submit(_open_and_read, path, read).result()
        except BrokenProcessPool:
            raise InputError(f"{path}: damaged or truncated Darshan log (darshan-util crashed reading it)") \
                from None


def _open_and_read(path: str, read: Reader[T]) -> T:
    """Open the log, ``read`` it and close it; darshan-util's errors as InputError (in the child)."""
    import faulthandler

    from darshan.backend import cffi_backend as dbe

    faulthandler.disable()  # (a crash here is said by the parent, in one line)
    try:
        with _stderr_to(tempfile.TemporaryFile()) as said:  # (darshan-util prints its errors there)
            log = dbe.log_open(path)
            if log["handle"] == dbe.ffi.NULL:
                raise InputError(f"{path}: not a Darshan log ({_first_error(said)})")
            try:
                out = read(dbe, log, path)
            finally:
                dbe.log_close(log)
    except InputError:
        raise
    except Exception as exc:  # (e.g. a file name or exe that is not UTF-8: a byte flipped)
        raise InputError(f"{path}: damaged Darshan log ({type(exc).__name__}: {exc})") from None
    if said.read(1):
        raise InputError(f"{path}: damaged or truncated Darshan log ({_first_error(said)})")
    return out


@contextmanager
def _stderr_to(sink: IO[bytes]) -> Iterator[IO[bytes]]:
    """Send what C code writes to the standard error into ``sink`` (rewound at the end)."""
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(sink.fileno(), 2)
    try:
        yield sink
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        sink.seek(0)


def _first_error(said: IO[bytes]) -> str:
    """The first message darshan-util wrote, e.g. 'darshan-util: unable to read compressed data'."""
    said.seek(0)
    lines = said.read().decode(errors="replace").strip().splitlines()
    return "darshan-util: " + lines[0].removeprefix("Error: ").rstrip(".") if lines else "darshan-util failed"
