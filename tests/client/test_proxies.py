"""The I/O proxies ``examples/macsio.py`` (MACSio-like, MIF and SIF) and ``examples/ior.py`` (IOR-like)
under ``callid run``: real bytes written, read back and checked by the examples, and the MPI-IO calls and
disk operations the run logged."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import EXAMPLES, ROOT, callid_cmd

pytestmark = pytest.mark.mpi


@dataclass
class Run:
    """One ``callid run`` of an example: the process, its client calls and its Trove operations."""

    proc: subprocess.CompletedProcess
    calls: list[dict]
    trove: list[dict]

    def of(self, func: str) -> list[dict]:
        return [c for c in self.calls if c["func"] == func]

    def nbytes(self, func: str) -> int:
        return sum(c["bytes"] for c in self.of(func))


def run_example(tmp_path: Path, example: str, *args, ok: bool = True, name: str = "out") -> Run:
    out = tmp_path / name
    proc = callid_cmd("run", "-n", 4, "-d", out, EXAMPLES / example, *args, timeout=120, cwd=tmp_path)
    if ok:
        assert proc.returncode == 0, proc.stderr[-3000:]
    client = pq.read_table(out / "client.parquet").to_pylist()
    server = pq.read_table(out / "server.parquet").to_pylist()
    return Run(proc, [c for c in client if c["kind"] == "call"], [s for s in server if s["layer"] == "trove"])


# 4 ranks, 1.5 parts each on average: 6 parts, ranks 0..3 hold 1, 2, 1, 2 (part ids 0, 1-2, 3, 4-5);
# 3 variables of 4000 bytes (dump 0) and 6000 bytes (dump 1, growth 1.5); a 100-byte header per file
MACSIO = ["--num-dumps", "2", "--part-size", "4000", "--vars-per-part", "3", "--avg-num-parts", "1.5",
          "--dataset-growth", "1.5", "--meta-size", "100"]
PARTS = {0: 1, 1: 2, 2: 1, 3: 2}
VAR = {0: 4000, 1: 6000}


def macsio_file(index: int, dump: int) -> str:
    return f"/pvfs2/macsio_mpiio_{index:05d}_{dump:03d}.dat"


def test_macsio_mif_groups_write_one_file_each_in_turn_passing_the_baton(tmp_path):
    run = run_example(tmp_path, "macsio.py", "--parallel-file-mode", "MIF", "2", *MACSIO)
    # groups {0, 1} (parts 0-2) and {2, 3} (parts 3-5): 100 + 3 parts x 3 vars x VAR bytes per file
    sizes = {macsio_file(g, d): 100 + 9 * VAR[d] for g in (0, 1) for d in (0, 1)}
    total = sum(sizes.values())
    assert total == 2 * 100 + 2 * 100 + 18 * 4000 + 18 * 6000 == 180400
    assert "macsio: MIF 2, 4 ranks, 2 dumps, 6 parts x 3 vars x 4000 bytes (growth 1.5)" in run.proc.stdout
    assert f"macsio: total bytes {total} " in run.proc.stdout and " in 4 files; " in run.proc.stdout
    assert f"macsio: read-back OK ({total} bytes in 4 files)" in run.proc.stdout

    writes = run.of("MPI_File_write_at")
    assert run.of("MPI_File_write_at_all") == []
    assert {w["file"] for w in writes} == set(sizes)
    per_file = defaultdict(int)
    for w in writes:
        per_file[w["file"]] += w["bytes"]
    assert per_file == sizes
    # one request per variable of each part (plus the header of the group's first rank), growing per dump
    assert Counter((w["rank"], w["size"]) for w in writes) == Counter(
        {(r, VAR[d]): PARTS[r] * 3 for r in range(4) for d in (0, 1)}) + Counter(
        {(0, 100): 2, (2, 100): 2})
    assert sum(t["size"] for t in run.trove if t["op"] == "trove_write") == total
    # the group's first rank creates (and truncates) the file; every rank opens it alone to write
    # it, then with its group to read it back
    assert sorted((c["file"], c["rank"]) for c in run.of("MPI_File_set_size")) == sorted(
        (name, 2 * int(name.split("_")[-2])) for name in sizes)
    opens = Counter((o["file"], o["rank"]) for o in run.of("MPI_File_open"))
    assert opens == {(macsio_file(r // 2, d), r): 2 for r in range(4) for d in (0, 1)}
    # baton passing: in each group file, rank 2g + 1 opens it only after rank 2g closed it
    def first(func: str, name: str, rank: int, time: str) -> int:
        return min(c[time] for c in run.of(func) if (c["file"], c["rank"]) == (name, rank))

    for name in sizes:
        lead = 2 * int(name.split("_")[-2])
        assert (first("MPI_File_open", name, lead, "t_start") < first("MPI_File_close", name, lead, "t_end")
                <= first("MPI_File_open", name, lead + 1, "t_start"))
    assert run.nbytes("MPI_File_read_at") == total
    assert sum(t["size"] for t in run.trove if t["op"] == "trove_read") == total
    assert sorted(c["file"] for c in run.of("MPI_File_get_size")) == sorted(sizes)  # once per file


@pytest.mark.slow
def test_macsio_sif_writes_one_shared_file_per_dump_with_collective_writes(tmp_path):
    run = run_example(tmp_path, "macsio.py", "--parallel-file-mode", "SIF", *MACSIO)
    total = 2 * 100 + 18 * 4000 + 18 * 6000
    assert f"macsio: read-back OK ({total} bytes in 2 files)" in run.proc.stdout

    coll = run.of("MPI_File_write_at_all")
    assert len(coll) == 4 * 3 * 2 and all(c["collective"] for c in coll)
    assert Counter(c["coll_seq"] for c in coll) == {seq: 4 for seq in {c["coll_seq"] for c in coll}}
    # each variable is a slab of 6 parts: rank r writes its parts at its own offsets
    first = {0: 0, 1: 1, 2: 3, 3: 4}
    assert sorted((c["file"], c["rank"], c["offset"], c["bytes"]) for c in coll) == sorted(
        (macsio_file(0, d), r, 100 + (v * 6 + first[r]) * VAR[d], PARTS[r] * VAR[d])
        for d in (0, 1) for r in range(4) for v in range(3))
    headers = run.of("MPI_File_write_at")
    assert [(h["rank"], h["offset"], h["bytes"]) for h in headers] == [(0, 0, 100)] * 2
    assert run.nbytes("MPI_File_write_at_all") + run.nbytes("MPI_File_write_at") == total
    assert sum(t["size"] for t in run.trove if t["op"] == "trove_write") == total
    assert Counter(o["file"] for o in run.of("MPI_File_open")) == {macsio_file(0, 0): 8, macsio_file(0, 1): 8}
    assert len(run.of("MPI_File_set_size")) == 8 and all(c["collective"] for c in run.of("MPI_File_set_size"))
    reads = run.of("MPI_File_read_at_all")
    assert len(reads) == 24 and run.nbytes("MPI_File_read_at_all") + run.nbytes("MPI_File_read_at") == total


IOR = ["-b", "64k", "-t", "16k", "-s", "2"]  # 4 tasks x 2 segments x 64 KiB = 512 KiB in 16 KiB transfers


def ior_offsets(rank: int, fpp: bool) -> list[int]:
    return sorted((s * (1 if fpp else 4) + (0 if fpp else rank)) * 65536 + k * 16384
                  for s in range(2) for k in range(4))


@pytest.mark.parametrize("flags", [
    pytest.param([], marks=pytest.mark.slow),
    pytest.param(["-F", "-C"], marks=pytest.mark.slow),
    pytest.param(["-c", "-e", "-i", "2"], marks=pytest.mark.slow),
], ids=["shared", "file-per-process-reordered", "collective-fsync-2-iterations"])
def test_ior_writes_reads_and_checks_its_layout(tmp_path, flags):
    run = run_example(tmp_path, "ior.py", *IOR, *flags)
    fpp, collective, reorder = "-F" in flags, "-c" in flags, "-C" in flags
    iters = 2 if "-i" in flags else 1
    total = 4 * 2 * 65536
    out = run.proc.stdout
    assert f"ior: read-back OK ({total * iters} bytes checked)" in out
    assert sum(line.startswith("write ") for line in out.splitlines()) == iters + 1  # results + summary
    summary = out.split("Summary of all tests:")[1].splitlines()
    assert [line.split()[0] for line in summary[2:4]] == ["write", "read"]
    columns = ["4", str(iters), str(int(fpp)), str(int(reorder)), "2", "65536", "16384", "0.50", "MPIIO"]
    assert summary[2].split()[6:] == summary[3].split()[6:] == columns  # #Tasks reps fPP reord ... API
    write = "MPI_File_write_at_all" if collective else "MPI_File_write_at"
    read = "MPI_File_read_at_all" if collective else "MPI_File_read_at"
    assert not run.of("MPI_File_write_at" if collective else "MPI_File_write_at_all")
    for func in (write, read):
        assert len(run.of(func)) == 4 * 8 * iters and run.nbytes(func) == total * iters
        assert all(c["collective"] == collective and c["size"] == 16384 for c in run.of(func))
    name = (lambda r: f"/pvfs2/testFile.{r:08d}") if fpp else (lambda r: "/pvfs2/testFile")
    for r in range(4):
        mine = [c for c in run.of(write) if c["rank"] == r]
        assert {c["file"] for c in mine} == {name(r)}
        assert sorted(c["offset"] for c in mine) == sorted(ior_offsets(r, fpp) * iters)
        source = (r + 1) % 4 if reorder else r  # -C: read what the next task wrote
        got = [c for c in run.of(read) if c["rank"] == r]
        assert {c["file"] for c in got} == {name(source)}
        assert sorted(c["offset"] for c in got) == sorted(ior_offsets(source, fpp) * iters)
    assert sum(t["size"] for t in run.trove if t["op"] == "trove_write") == total * iters
    assert sum(t["size"] for t in run.trove if t["op"] == "trove_read") == total * iters
    assert len(run.of("MPI_File_sync")) == (4 * iters if "-e" in flags else 0)
    deletes = run.of("MPI_File_delete")  # the files are removed after each iteration (no -k)
    assert sorted(d["file"] for d in deletes) == sorted(name(r) for r in range(4 if fpp else 1)) * iters


@pytest.mark.slow
def test_ior_read_back_finds_a_corrupted_byte(tmp_path):
    """-w -k leaves real files (outside the mount: real MPI-IO); one flipped byte fails a later -r."""
    target = tmp_path / "real" / "testFile"
    target.parent.mkdir()
    run_example(tmp_path, "ior.py", "-b", "64k", "-t", "16k", "-w", "-k", "-o", target, name="write")
    assert target.stat().st_size == 4 * 65536
    data = bytearray(target.read_bytes())
    data[3 * 65536 + 12345] ^= 0x40
    target.write_bytes(data)
    run = run_example(tmp_path, "ior.py", "-b", "64k", "-t", "16k", "-r", "-k", "-o", target, ok=False,
                      name="read")
    assert "ior: read-back FAILED (1 of 262144 bytes wrong)" in run.proc.stdout
    assert run.proc.returncode == 1 and run.trove == []


@pytest.mark.parametrize("example, args, message", [
    ("macsio.py", ["--parallel-file-mode", "MIF"],
     "macsio.py: error: --parallel-file-mode: expected 'MIF N' (N >= 1), 'MIFFPP' or 'SIF', got 'MIF'"),
    ("macsio.py", ["--part-size", "80q"],
     "macsio.py: error: argument --part-size/--part_size: '80q' is not a size "
     "(examples: 65536, 64KiB, 1MiB)"),
    ("macsio.py", ["--avg-num-parts", "-1"], "macsio.py: error: --avg-num-parts must be > 0, got -1.0"),
    ("ior.py", ["-a", "POSIX"], "ior.py: error: -a POSIX: only the MPIIO API is supported"),
    ("ior.py", ["-b", "64k", "-t", "48k"],
     "ior.py: error: block size must be a multiple of transfer size (-b 65536, -t 49152)"),
    ("ior.py", ["-x"], "ior.py: error: unrecognized arguments: -x"),
], ids=["macsio-mif-without-n", "macsio-bad-size", "macsio-negative-parts", "ior-posix",
        "ior-b-not-multiple-of-t", "ior-unknown-option"])
def test_bad_options_exit_2_with_one_line(example, args, message):
    proc = subprocess.run([sys.executable, EXAMPLES / example, *args], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert (proc.returncode, proc.stderr.strip(), proc.stdout) == (2, message, "")


@pytest.mark.slow
def test_bad_options_under_callid_run_are_printed_once(tmp_path):
    """Every rank rejects the options; rank 0 alone prints the line, and callid names the exit status."""
    proc = callid_cmd("run", "-n", 3, "-d", tmp_path / "out", EXAMPLES / "ior.py", "-a", "POSIX")
    assert proc.returncode == 1
    assert proc.stderr.count("ior.py: error: -a POSIX: only the MPIIO API is supported\n") == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("callid: error: rank ") and "failed: exited with status 2" in last
