"""What ``callid run --mpi-io romio`` adds to a run: the interposition library, the FUSE mount of the
run's file system in a mount namespace of the run's own, and the ranks' records turned into client
log parts once they ended."""

from __future__ import annotations

import ctypes.util
import os
import sys
from pathlib import Path

import pyarrow.parquet as pq

from callid.romio import build
from callid.romio import records as R
from callid.romio.mount import READY
from callid_core.atomic import replacing
from callid_core.errors import Failed

__all__ = ["Missing", "collect", "command", "fuse_missing", "is_python"]

SLOTS = "romio.slots"
FUSE_LOG = "fuse.log"  # the FUSE client's output
ABI_DIR = "mpich-abi"  # (see mpich_abi)
#: what a run on the MPI library leaves in its parts directory (removed before the next one starts)
PART_FILES = ("romio-rank*.rec", "romio-rank*.dat", SLOTS, FUSE_LOG, READY)


class Missing(Failed):
    """What the run needs and this machine lacks (the message says how to get it)."""


def fuse_missing() -> str:
    """What of FUSE this machine lacks ("": nothing)."""
    if not os.path.exists("/dev/fuse"):
        return ("/dev/fuse is missing (load the fuse module: modprobe fuse; in a container: "
                "--device /dev/fuse)")
    if not ctypes.util.find_library("fuse3"):
        return "libfuse3 is missing (apt-get install fuse3, or dnf install fuse3)"
    return ""


def is_python(target: list[str]) -> bool:
    """Is ``target`` (``SCRIPT ARGS`` or ``-m MODULE ARGS``) a Python program?"""
    return target[0] == "-m" or target[0].endswith(".py")


def command(target: list[str], np: int, mpiexec: str, config_path: Path, parts: Path, mount: str,
            layout: str, stamp: bool, mpicc: str | None, hints: bool = True,
            mpi: bool = True, nested: bool = False,
            straggle: dict[int, float] | None = None) -> tuple[list[str], dict[str, str]]:
    """The command running ``target`` on ``np`` ranks with the library preloaded, in a session that
    mounts the file system at ``mount`` first, and the environment it adds (``straggle``: {rank: seconds
    late to each MPI-IO call}, planted faults).  :class:`Missing` or
    ``build.BuildError`` when this machine cannot."""
    missing = fuse_missing()
    if missing:
        raise Missing(f"--mpi-io romio needs FUSE: {missing}")
    library = build.library(mpicc)
    slots = parts / SLOTS
    slots.write_bytes(bytes(R.SLOT.itemsize * R.NSLOTS))
    program = [sys.executable, *target] if is_python(target) else target
    py = sys.executable
    client = [py, "-m", "callid.romio.mount", "--config", str(config_path.resolve()), "--mountpoint", mount,
              "--records", str(parts.resolve()), "--slots", str(slots.resolve()), "--ranks", str(np)]
    libraries = ":".join(filter(None, [str(mpich_abi(parts, mpiexec)), os.environ.get("LD_LIBRARY_PATH")]))
    launcher = [mpiexec, "-n", str(np), "-genv", "LD_PRELOAD", str(library), "-genv", "LD_LIBRARY_PATH",
                libraries, *program]
    cmd = [py, "-m", "callid.romio.session", "--mountpoint", mount, "--records", str(parts.resolve()),
           "--log", str((parts / FUSE_LOG).resolve()), "--", *client, "--", *launcher]
    env = {R.ENV["dir"]: str(parts.resolve()), R.ENV["layout"]: layout, R.ENV["stamp"]: "1" if stamp else "0",
           R.ENV["slots"]: str(slots.resolve()), R.ENV["hints"]: "1" if hints else "0",
           R.ENV["mpi"]: "1" if mpi else "0", R.ENV["nested"]: "1" if nested else "0",
           R.ENV["straggle"]: ",".join(f"{rank}:{round(s * 1e9)}" for rank, s in (straggle or {}).items())}
    return cmd, env


def mpich_abi(parts: Path, mpiexec: str) -> Path:
    """A directory where the MPICH ABI's library names are the launcher's MPI (the mpich wheel's
    ``libmpi.so.12``), so that a program built against another MPICH-ABI installation (Debian's
    ``libmpich.so.12``, and its HDF5 and Fortran bindings) runs on it, and is traced."""
    lib = Path(mpiexec).resolve().parent.parent / "lib"
    alias = parts / ABI_DIR
    alias.mkdir(exist_ok=True)
    for name, target in (("libmpich.so.12", lib / "libmpi.so.12"), ("mpich", lib / "mpich")):
        link = alias / name
        if target.exists() and not link.is_symlink():
            link.symlink_to(target)
    return alias.resolve()


def collect(parts: Path, metadata: dict[bytes, bytes], clock: str = "host0") -> int:
    """Turn every rank's records in ``parts`` into a client log part (``client-romio-rankN``); the rows.
    The records stay until the next run (a part that cannot be read is named in :class:`Failed`)."""
    rows = 0
    for rec in sorted(parts.glob("romio-rank*.rec")):
        try:
            table = R.read_rank(rec, rec.with_suffix(".dat"), clock)
        except (OSError, ValueError) as exc:
            raise Failed(f"{rec}: the interposition library's records cannot be read: {exc}") from None
        with replacing(parts / f"client-{rec.stem}.000000.parquet") as tmp:
            pq.write_table(table.replace_schema_metadata(metadata), tmp)
        rows += table.num_rows
    return rows
