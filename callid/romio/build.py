"""Build the interposition library with the MPI's own ``mpicc``, once per source and compiler (cached)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from callid.romio.records import c_header
from callid_core.errors import Failed

__all__ = ["BuildError", "find_mpicc", "library"]

SOURCE = Path(__file__).with_name("callid_pmpi.c")
LIBRARY = "libcallid_pmpi.so"


class BuildError(Failed):
    """The library cannot be built: no compiler, or it failed (the message says which and how to fix)."""


def find_mpicc(mpicc: str | None = None) -> str:
    """``mpicc`` given, else the ``mpich`` wheel's (beside this Python), else one on PATH."""
    if mpicc:
        found = shutil.which(mpicc)
        if not found:
            raise BuildError(f"--mpicc: {mpicc} is not an executable")
        return found
    beside = Path(sys.executable).parent / "mpicc"
    if beside.exists():
        return str(beside)
    found = shutil.which("mpicc")
    if not found:
        raise BuildError("no mpicc found: install the 'mpich' wheel (pip install mpich), or name an "
                         "MPICH-ABI compiler wrapper with --mpicc")
    return found


def _cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "callid" / "romio"


def _identity(mpicc: str) -> bytes:
    """What the library's build depends on: the compiler wrapper and what it runs (``-show``)."""
    try:
        shown = subprocess.run([mpicc, "-show"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(f"{mpicc} does not run: {exc}") from None
    return f"{os.path.realpath(mpicc)}\n{shown}".encode()


def library(mpicc: str | None = None, cache: Path | None = None) -> Path:
    """The library built with ``mpicc`` (see :func:`find_mpicc`), from the cache when it is there."""
    compiler = find_mpicc(mpicc)
    header = c_header()
    digest = hashlib.sha256(SOURCE.read_bytes() + header.encode() + _identity(compiler)).hexdigest()[:16]
    target = (cache or _cache_root()) / digest / LIBRARY
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        (Path(tmp) / "callid_records.h").write_text(header)
        out = Path(tmp) / LIBRARY
        cmd = [compiler, "-shared", "-fPIC", "-O2", "-Wall", "-I", tmp, "-o", str(out), str(SOURCE),
               "-lpthread", "-ldl"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BuildError(f"{compiler} did not build the interposition library: {exc}") from None
        if done.returncode != 0:
            log = target.parent / "build.log"
            log.write_text(" ".join(cmd) + "\n" + done.stdout + done.stderr)
            first = next((line for line in done.stderr.splitlines() if "error" in line),
                         done.stderr.strip()[:200])
            raise BuildError(f"{compiler} failed to build the interposition library: {first} (see {log})")
        os.replace(out, target)
    return target
