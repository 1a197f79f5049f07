"""Parallel HDF5 and Fortran on the MPI library's MPI-IO: built with Debian's MPICH toolchain
(``libhdf5-mpich-dev``'s ``h5pcc``, ``libmpich-dev``'s ``mpif90``), run by ``callid run`` on the
mpich wheel's MPI (the same MPICH ABI), every MPI-IO call traced down to its disk operations."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import traced
from tests.romio.conftest import C_EXAMPLES, needs_fuse

pytestmark = [pytest.mark.mpi, pytest.mark.slow, needs_fuse]


def _build(tool: str, source, out, *flags: str) -> str:
    """Build ``source`` with ``tool`` (skipped where it is missing, unless CI requires it)."""
    if shutil.which(tool) is None:
        if os.environ.get("CALLID_REQUIRE_FUSE"):
            pytest.fail(f"{tool} is missing (apt-get install libhdf5-mpich-dev gfortran)")
        pytest.skip(f"{tool} is missing (apt-get install libhdf5-mpich-dev gfortran)")
    subprocess.run([tool, *flags, "-o", str(out), str(source)], check=True, capture_output=True,
                   cwd=out.parent)
    return str(out)


def _exact_and_whole(run, func: str, nbytes: int) -> None:
    """Every arrow exact; the collective's disk operations moved ``nbytes``, every one attributed."""
    assert run.q("SELECT count(*) FILTER (WHERE NOT exact), count(*) FROM arrows")[0][0] == 0
    assert run.q(f"SELECT sum(share_bytes) FROM arrows WHERE func = '{func}' AND layer = 'trove'") == [
        (nbytes,)]
    assert run.stats["unattributed_server_ops"] == 0


def test_parallel_hdf5_dataset_written_collectively_down_to_the_disk_operations(tmp_path):
    exe = _build("h5pcc", C_EXAMPLES / "hdf5" / "dataset.c", tmp_path / "dataset")
    run = traced(tmp_path, "h5", "-n", 4, exe, "-n", 64, "-c", 256, "-f", "/pvfs2/dataset.h5")
    assert "data check: passed" in run.stdout
    funcs = dict(run.q("SELECT func, count(*) FROM calls GROUP BY func"))
    # HDF5's MPI-IO: the raw data through a file view, collectively; its metadata independently
    assert funcs["MPI_File_write_at_all"] == funcs["MPI_File_read_at_all"] == 4
    assert funcs["MPI_File_set_view"] >= 8 and funcs["MPI_File_write_at"] >= 1
    _exact_and_whole(run, "MPI_File_write_at_all", 4 * 64 * 256 * 8)
    _exact_and_whole(run, "MPI_File_read_at_all", 4 * 64 * 256 * 8)


@pytest.mark.parametrize("module", ["mpi", "mpi_f08"])
def test_fortran_is_traced(tmp_path, module):
    """Both Fortran modules: mpi's bindings call MPI_File_*, mpi_f08's PMPI_File_* (and PMPI_Init)."""
    exe = _build("mpif90", C_EXAMPLES / "fortran" / "write_at_all.F90", tmp_path / "write_at_all",
                 *(["-DF08"] if module == "mpi_f08" else []))
    run = traced(tmp_path, "f90", "-n", 4, exe, "-n", 65536, "-f", "/pvfs2/write_at_all")
    assert "data check: passed" in run.stdout
    assert run.q("SELECT rank, list(func ORDER BY counter) FROM calls GROUP BY rank ORDER BY rank") == [
        (r, ["MPI_File_open", "MPI_File_write_at_all", "MPI_File_read_at_all", "MPI_File_close"])
        for r in range(4)]
    _exact_and_whole(run, "MPI_File_write_at_all", 4 * 65536 * 8)
