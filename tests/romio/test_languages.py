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


def test_macsio_hdf5_interface_in_both_file_modes(tmp_path):
    """MACSio's HDF5 interface (examples/c/hdf5/macsio.c): SIF, one file per dump, each variable one dataset
    written collectively through the MPI library's MPI-IO; MIF 2, two files per dump written with HDF5's
    POSIX driver by the ranks of each group in turn (the baton), their system calls traced on the mount as
    the ranks' (a rank known to the file system from MPI_Init on, though it makes no MPI-IO call)."""
    exe = _build("h5pcc", C_EXAMPLES / "hdf5" / "macsio.c", tmp_path / "macsio")
    common = ("--avg_num_parts", "1.5", "--part_size", 32768, "--num_dumps", 2, "--dir", "/pvfs2")
    sif = traced(tmp_path, "sif", "-n", 4, exe, "--parallel_file_mode", "SIF", *common)
    assert "6 parts of 32768 bytes (4 variables) on 4 ranks" in sif.stdout
    assert "data check: passed" in sif.stdout
    # each rank's parts of each variable in one collective write per dump: 4 variables x 2 dumps
    per_rank = "SELECT DISTINCT count(*) FROM calls WHERE func = 'MPI_File_write_at_all' GROUP BY rank"
    assert sif.q(per_rank) == [(8,)]
    _exact_and_whole(sif, "MPI_File_write_at_all", 2 * 6 * 32768)
    mif = traced(tmp_path, "mif", "-n", 4, exe, "--parallel_file_mode", "MIF", 2, *common)
    assert "data check: passed" in mif.stdout
    # the two files of each dump written by their group's ranks, one after the other
    writes = mif.q("SELECT file, rank, min(t_start), max(t_end) FROM calls WHERE origin = 'posix' "
                   "AND func LIKE '%write%' AND file LIKE '%macsio_hdf5_%' GROUP BY ALL ORDER BY file, rank")
    files = sorted({w[0] for w in writes})
    assert [f.rsplit("/", 1)[1] for f in files] == [f"macsio_hdf5_{d:03d}_{g:03d}.h5" for d in (0, 1)
                                                    for g in (0, 1)]
    for f in files:
        ranks = [w for w in writes if w[0] == f]
        assert [w[1] for w in ranks] in ([0, 1], [2, 3])
        assert ranks[0][3] <= ranks[1][2], ranks  # (the second rank writes once the first has closed)
