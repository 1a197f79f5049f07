"""Outputs are written under a temporary name and renamed only when complete."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from callid_core.errors import InputError

__all__ = ["INTERRUPTED", "Interrupt", "check_space", "install", "on_interrupt", "replacing", "temporary"]

#: set once the user interrupted the command (its SIGINT handler: :func:`on_interrupt`); an interrupted
#: command installs no output, even where a library swallowed the exception (DuckDB does when its query
#: ends before it looks; when it looks in time, it raises its own "Query interrupted")
INTERRUPTED = threading.Event()


class Interrupt(BaseException):  # noqa: N818 (as KeyboardInterrupt: what ``except Exception`` lets through)
    """Ctrl-C in the command line (a KeyboardInterrupt the command-line library does not turn into
    its own "Aborted!")."""


def on_interrupt(signum: int, frame: object) -> None:
    """The command line's SIGINT handler: remember the interrupt, then raise it."""
    INTERRUPTED.set()
    raise Interrupt


def temporary(out: str | os.PathLike[str]) -> Path:
    """The temporary name an output is written under: hidden, next to it, of this process."""
    out = Path(out)
    return out.with_name(f".{out.name}.{os.getpid()}.tmp")


def install(tmp: Path, out: Path) -> None:
    """Rename the finished ``tmp`` (a file or a directory) to ``out``; a previous ``out`` is
    replaced only if this works.  :class:`Interrupt` if the command was interrupted."""
    if INTERRUPTED.is_set():
        raise Interrupt
    if not tmp.is_dir():
        os.replace(tmp, out)
        return
    if not out.exists():
        os.rename(tmp, out)
        return
    old = out.with_name(f".{out.name}.{os.getpid()}.old")
    os.rename(out, old)
    try:
        os.rename(tmp, out)
    except OSError:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


@contextmanager
def replacing(out: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``out``; it becomes ``out`` only if the block succeeds.

    An output that is a directory, or whose directory does not exist, is an :class:`InputError`.
    """
    out = Path(out)
    if out.is_dir():
        raise InputError(f"{out}: is a directory")
    if not out.parent.is_dir():
        raise InputError(f"{out}: directory {out.parent} does not exist")
    tmp = temporary(out)
    try:
        yield tmp
        install(tmp, out)
    except OSError as exc:
        if exc.filename is None:  # (e.g. a full disk while writing: say which output it was)
            exc.filename = str(out)
        raise
    finally:
        tmp.unlink(missing_ok=True)


def check_space(out: str | os.PathLike[str], need: int, what: str) -> None:
    """:class:`InputError` if the directory of ``out`` has less than ``need`` bytes free for ``what``
    (e.g. 'the trace'), saying how to need less."""
    out = Path(out)
    free = shutil.disk_usage(out.parent).free
    if need > free:
        raise InputError(f"{out}: {what} needs about {need / 1e9:.1f} GB and {out.parent} has "
                         f"{free / 1e9:.1f} GB free; narrow the selection (--window, --ranks, --files, "
                         "--servers) or write elsewhere")
