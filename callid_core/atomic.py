"""Outputs are written under a temporary name and renamed only when complete."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def replacing(out: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``out``; it becomes ``out`` only if the block succeeds."""
    out = Path(out)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
