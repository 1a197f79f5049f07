"""Outputs are written under a temporary name and renamed only when complete."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from callid_core.errors import InputError


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
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
