"""The C programs of ``examples/c``, built with the MPI's ``mpicc``; what a run on the MPI library needs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from callid.romio.build import find_mpicc
from callid.romio.launch import fuse_missing
from tests.conftest import EXAMPLES

C_EXAMPLES = EXAMPLES / "c"


def romio_missing() -> str:
    """What a run on the MPI library (FUSE in a mount namespace of its own) lacks here ("": nothing)."""
    if os.geteuid() != 0:
        return "not root (the run's mount namespace)"
    return fuse_missing()


#: CI sets CALLID_REQUIRE_FUSE: a missing FUSE fails there instead of skipping
needs_fuse = pytest.mark.skipif(bool(romio_missing()) and not os.environ.get("CALLID_REQUIRE_FUSE"),
                                reason=f"--mpi-io romio cannot run here: {romio_missing()}")


@pytest.fixture(scope="session")
def programs(tmp_path_factory) -> dict[str, Path]:
    """Every C example, built with the wheel's mpicc: name -> executable."""
    out = tmp_path_factory.mktemp("c-programs")
    built = {}
    for source in sorted(C_EXAMPLES.glob("*.c")):
        exe = out / source.stem
        subprocess.run([find_mpicc(), "-O2", "-o", str(exe), str(source)], check=True, capture_output=True)
        built[source.stem] = exe
    return built
