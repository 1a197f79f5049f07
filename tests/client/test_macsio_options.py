"""MACSio's options in ``examples/macsio.py`` beyond plain MIF and SIF (tests/client/test_proxies.py): SIF N
and MIFOPT, independent SIF writes, mesh part types and dimensions, the units prefix system, metadata, the
compute work between dumps, random parts per task, the root file, and the log and timings files.  Each
test runs the program under ``callid run`` on 4 ranks and checks the MPI-IO calls it made (sizes and
offsets computed here from MACSio's documented arithmetic), what it printed and what it logged."""

from __future__ import annotations

import json
import math
import re
import subprocess
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import EXAMPLES, callid_cmd

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # (about 70 s: the fast lane stays under 2 minutes)

WRITES = ("MPI_File_write_at", "MPI_File_write_at_all")


@dataclass
class Run:
    """One ``callid run`` of macsio.py (in ``cwd``): the process and its client calls."""

    proc: subprocess.CompletedProcess
    calls: list[dict]
    cwd: Path

    def of(self, *funcs: str) -> list[dict]:
        return [c for c in self.calls if c["func"] in funcs]

    def writes_of(self, rank: int, name: str) -> list[dict]:
        """``rank``'s writes to file ``name``, in offset order."""
        return sorted((w for w in self.of(*WRITES) if (w["rank"], w["file"]) == (rank, name)),
                      key=lambda w: w["offset"])

    def bytes_per_file(self) -> dict[str, int]:
        per_file: dict[str, int] = defaultdict(int)
        for w in self.of(*WRITES):
            per_file[w["file"]] += w["bytes"]
        return dict(per_file)


def run_macsio(tmp_path: Path, *args, servers: int = 2, name: str = "out") -> Run:
    out = tmp_path / name
    proc = callid_cmd("run", "-n", 4, "--servers", servers, "-d", out, EXAMPLES / "macsio.py", *args,
                      cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = pq.read_table(out / "client.parquet").to_pylist()
    return Run(proc, [c for c in client if c["kind"] == "call"], tmp_path)


def data_file(index: int, dump: int, directory: str = "/pvfs2") -> str:
    return f"{directory}/macsio_mpiio_{index:05d}_{dump:03d}.dat"


def log_sections(path: Path) -> dict[int, list[str]]:
    """A MACSio log file's non-blank lines per task (under each ``--- Processor NNNNNN ---`` line)."""
    sections: dict[int, list[str]] = {}
    rank = -1
    for line in path.read_text().splitlines():
        head = re.fullmatch(r"-+ Processor (\d{6}) -+", line)
        if head:
            rank = int(head.group(1))
            sections[rank] = []
        elif line.strip():
            sections[rank].append(line.rstrip())
    return sections


# 4 ranks, 1.5 parts each on average, dealt evenly: ranks 0..3 hold 1, 2, 1, 2 parts (ids 0, 1-2, 3, 4-5);
# 3 variables of 4000 bytes, a 100-byte header per file (one --meta_size: the header)
BASE = ["--num_dumps", "2", "--part_size", "4000", "--vars_per_part", "3", "--avg_num_parts", "1.5",
        "--meta_size", "100"]
PARTS = {0: 1, 1: 2, 2: 1, 3: 2}


def test_sif_n_shares_n_files_between_groups_and_mifopt_takes_one_file_per_io_server(tmp_path):
    run = run_macsio(tmp_path, "--parallel_file_mode", "SIF", "2", *BASE, name="sif2")
    # groups {0, 1} (parts 0-2) and {2, 3} (parts 3-5): each file 100 + 3 parts x 3 vars x 4000 bytes
    sizes = {data_file(g, d): 100 + 9 * 4000 for g in (0, 1) for d in (0, 1)}
    total = sum(sizes.values())
    assert "macsio: SIF 2, 4 ranks, 2 dumps, 6 parts x 3 vars x 4000 bytes (growth 1)" in run.proc.stdout
    assert f"macsio: read-back OK ({total} bytes in 4 files)" in run.proc.stdout
    assert run.bytes_per_file() == sizes
    coll = run.of("MPI_File_write_at_all")
    # each variable is a slab of the group's 3 parts: rank r writes its parts at its place in the group
    local = {0: 0, 1: 1, 2: 0, 3: 1}
    assert sorted((c["file"], c["rank"], c["offset"], c["bytes"]) for c in coll) == sorted(
        (data_file(r // 2, d), r, 100 + (v * 3 + local[r]) * 4000, PARTS[r] * 4000)
        for d in (0, 1) for r in range(4) for v in range(3))
    assert all(c["collective"] and c["comm_size"] == 2 for c in coll)  # the group's communicator
    headers = run.of("MPI_File_write_at")
    assert sorted((h["file"], h["rank"], h["offset"], h["bytes"]) for h in headers) == sorted(
        (data_file(g, d), 2 * g, 0, 100) for g in (0, 1) for d in (0, 1))
    assert Counter((o["file"], o["rank"]) for o in run.of("MPI_File_open")) == {
        (data_file(r // 2, d), r): 2 for r in range(4) for d in (0, 1)}

    run = run_macsio(tmp_path, "--parallel_file_mode", "MIFOPT", *BASE, servers=3, name="mifopt")
    # 3 I/O servers: 3 files; MIF groups of 4 ranks in 3 files: {0, 1}, {2}, {3} with parts 0-2, 3, 4-5
    sizes = {data_file(g, d): 100 + n * 3 * 4000 for g, n in enumerate((3, 1, 2)) for d in (0, 1)}
    assert "macsio: MIFOPT (3 files), 4 ranks" in run.proc.stdout
    assert f"macsio: read-back OK ({sum(sizes.values())} bytes in 6 files)" in run.proc.stdout
    assert run.bytes_per_file() == sizes and run.of("MPI_File_write_at_all") == []
    assert [c["rank"] for c in run.of("MPI_File_get_info")] == [0]  # the probe of the striping factor


@pytest.mark.parametrize("flag", ["--sif-independent",
                                  pytest.param("--no_collective", marks=pytest.mark.slow)])
def test_sif_independent_writes_the_collective_layout_with_independent_calls(tmp_path, flag):
    run = run_macsio(tmp_path, "--parallel_file_mode", "SIF", flag, *BASE)
    total = 2 * (100 + 18 * 4000)
    assert "macsio: SIF (independent writes), 4 ranks" in run.proc.stdout
    assert f"macsio: read-back OK ({total} bytes in 2 files)" in run.proc.stdout
    assert run.of("MPI_File_write_at_all") == [] and run.of("MPI_File_read_at_all") == []
    first = {0: 0, 1: 1, 2: 3, 3: 4}
    writes = run.of("MPI_File_write_at")
    assert not any(w["collective"] for w in writes)
    assert sorted((w["file"], w["rank"], w["offset"], w["bytes"]) for w in writes) == sorted(
        [(data_file(0, d), r, 100 + (v * 6 + first[r]) * 4000, PARTS[r] * 4000)
         for d in (0, 1) for r in range(4) for v in range(3)]
        + [(data_file(0, d), 0, 0, 100) for d in (0, 1)])
    assert sum(c["bytes"] for c in run.of("MPI_File_read_at")) == total


# Parts of --part_size 8000: 1000 nodes, shaped as MACSio does (as close to equal as possible), zones the
# nodes less one per axis.  9 variables cycling through MACSio's 8: zone-centered when i % 8 is 0, 1, 2 or
# 7 (5 of them), node-centered otherwise (4).  The mesh's arrays, worked out by hand from the doc:
MESH_CASES = [
    # rectilinear 2D, 25 x 40 nodes, 24 x 39 = 936 zones: one coordinate array per axis
    ("rectilinear", 2, "25x40", [25 * 8, 40 * 8], 936),
    # curvilinear 1D, 1000 nodes, 999 zones: one coordinate per node
    ("curvilinear", 1, "1000", [8000], 999),
    # unstructured 3D, 10 x 10 x 10 nodes, 729 zones: 3 coordinates per node and 8 nodes per zone
    ("unstructured", 3, "10x10x10", [8000, 8000, 8000, 729 * 8 * 8], 729),
    # arbitrary 2D, 25 x 40 nodes, 936 zones, 25 x 39 + 24 x 40 = 1935 faces (edges): 2 coordinates per
    # node, 2 nodes and a count per face, 4 faces and a count per zone
    ("arbitrary", 2, "25x40", [8000, 8000, 1935 * 2 * 8, 1935 * 8, 936 * 4 * 8, 936 * 8], 936),
    # uniform 3D: no bulk data for the mesh
    ("uniform", 3, "10x10x10", [], 729),
]


@pytest.mark.parametrize("kind, dim, dims, mesh, zones", [
    pytest.param(*case, marks=[pytest.mark.slow] if case[0] in ("curvilinear", "uniform") else [], id=case[0])
    for case in MESH_CASES])
def test_part_type_and_dim_size_each_part_by_its_mesh(tmp_path, kind, dim, dims, mesh, zones):
    run = run_macsio(tmp_path, "--parallel_file_mode", "MIF", "2", "--part_size", "8000",
                     "--vars_per_part", "9", "--avg_num_parts", "1.5", "--num_dumps", "1", "--meta_size", "0",
                     "--part_type", kind, "--part_dim", str(dim))
    variables = [zones * 8] * 5 + [1000 * 8] * 4
    part = sum(mesh) + sum(variables)
    described = f"macsio: {dim}D {kind} mesh parts of {dims} nodes: {len(mesh) + 9} arrays, {part} bytes"
    assert described + " per part" in run.proc.stdout
    sizes = {data_file(g, 0): 3 * part for g in (0, 1)}  # groups {0, 1} and {2, 3}: 3 parts each
    assert run.bytes_per_file() == sizes
    assert f"macsio: read-back OK ({sum(sizes.values())} bytes in 2 files)" in run.proc.stdout
    for r in range(4):
        writes = run.writes_of(r, data_file(r // 2, 0))
        # one request per array of each part, the parts one after the other, contiguous
        assert sorted(w["bytes"] for w in writes) == sorted((mesh + variables) * PARTS[r])
        assert all(a["offset"] + a["bytes"] == b["offset"] for a, b in zip(writes, writes[1:]))


@pytest.mark.parametrize("system, k, unit, log_unit", [
    ("decimal", 1000, "MB", "Kb"), pytest.param("binary", 1024, "MiB", "Ki", marks=pytest.mark.slow)])
def test_units_prefix_system_reads_and_prints_sizes(tmp_path, system, k, unit, log_unit):
    run = run_macsio(tmp_path, "--parallel_file_mode", "MIF", "2", "--part_size", "2K", "--meta_size", "1K",
                     "--vars_per_part", "2", "--num_dumps", "1", "--units_prefix_system", system,
                     "--log-dir", "logs")
    # 2 files with a 1K header; 4 parts of 2 variables of 2K
    total = 2 * k + 4 * 2 * 2 * k
    assert Counter(w["bytes"] for w in run.of(*WRITES)) == {2 * k: 8, k: 2}
    assert f"macsio: total bytes {total} ({total / k ** 2:.4f} {unit}) in 2 files" in run.proc.stdout
    assert f"/s\nmacsio: read-back OK ({total} bytes in 2 files)" in run.proc.stdout
    log = log_sections(tmp_path / "logs" / "macsio-log.log")
    assert any(f"Total Bytes: {total / k:8.4f} {log_unit};" in line for line in log[0])
    # each rank's dump: a header (ranks 0 and 2) and 2 variables of 2K
    for r in range(4):
        assert f"Dump 00 BW: {(2 * 2 * k + (k if r % 2 == 0 else 0)) / k:8.4f} {log_unit}/" in log[r][0]
    assert not (tmp_path / "macsio-log.log").exists()


@pytest.mark.parametrize("meta_type", ["tabular", pytest.param("amorphous", marks=pytest.mark.slow)])
def test_meta_type_and_sizes_write_each_tasks_metadata_after_its_parts(tmp_path, meta_type):
    run = run_macsio(tmp_path, "--parallel_file_mode", "MIF", "2", "--part_size", "4000",
                     "--vars_per_part", "2", "--num_dumps", "2", "--meta_size", "1000", "3000",
                     "--meta_type", meta_type)
    meta = {r: 1000 + (3000 if r == 0 else 0) for r in range(4)}  # per task, and more on task 0 (root)
    # one part per rank: 2 x 4000 bytes, then its metadata; no header
    sizes = {data_file(g, d): 2 * 8000 + meta[2 * g] + meta[2 * g + 1] for g in (0, 1) for d in (0, 1)}
    assert f"macsio: {meta_type} metadata: 1000 bytes per task, 4000 on task 0" in run.proc.stdout
    assert run.bytes_per_file() == sizes
    assert f"macsio: read-back OK ({sum(sizes.values())} bytes in 4 files)" in run.proc.stdout
    for r in range(4):
        for d in (0, 1):
            writes = run.writes_of(r, data_file(r // 2, d))
            assert [w["bytes"] for w in writes[:2]] == [4000, 4000]
            objects = [w["bytes"] for w in writes[2:]]
            assert all(a["offset"] + a["bytes"] == b["offset"] for a, b in zip(writes, writes[1:]))
            assert sum(objects) == meta[r]
            if meta_type == "tabular":  # the doc's 3 tables: 60% 24-byte, 24% 12-byte, 16% 40-byte records
                assert objects == [meta[r] * 60 // 100, meta[r] * 24 // 100, meta[r] * 16 // 100]
            else:  # a random hierarchy of small objects of varied sizes, one write each
                assert len(objects) >= 5 and len(set(objects)) > 2 and max(objects) < meta[r] // 2


def work_phases(tmp_path: Path) -> dict[int, list[tuple[int, float, str]]]:
    """Each task's logged work phases: (level, duration, what was done)."""
    phases = {}
    for rank, lines in log_sections(tmp_path / "macsio-log.log").items():
        found = [re.search(r"Work phase: Level (\d): .*Duration ([\d.]+) sec: (.*?):::", x) for x in lines]
        phases[rank] = [(int(m.group(1)), float(m.group(2)), m.group(3)) for m in found if m]
    return phases


@pytest.mark.parametrize("level, what", [
    (1, r"sleep"), pytest.param(2, r"[1-9]\d* flops", marks=pytest.mark.slow),
    pytest.param(3, r"[1-9]\d* Jacobi sweeps", marks=pytest.mark.slow)])
def test_compute_work_intensity_works_between_dumps(tmp_path, level, what):
    run = run_macsio(tmp_path, "--parallel_file_mode", "MIF", "2", "--part_size", "4000",
                     "--vars_per_part", "1", "--num_dumps", "3", "--compute_time", "0.2",
                     "--compute_work_intensity", str(level))
    phases = work_phases(tmp_path)
    assert sorted(phases) == [0, 1, 2, 3]
    for rank, done in phases.items():
        assert len(done) == 2  # between 3 dumps
        for lvl, seconds, text in done:
            assert lvl == level and 0.2 <= seconds < 2.0 and re.fullmatch(what, text)
        # the work happens between the dumps: >= 0.2 s from the end of one dump's writes to the next's
        dumps = {d: run.writes_of(rank, data_file(rank // 2, d)) for d in range(3)}
        ends = {d: max(w["t_end"] for w in writes) for d, writes in dumps.items()}
        starts = {d: min(w["t_start"] for w in writes) for d, writes in dumps.items()}
        assert all(starts[d + 1] - ends[d] >= 0.2e9 for d in (0, 1))
    timings = (tmp_path / "macsio-timings.log").read_text()
    assert timings.count("CNT=0002,") >= 4 and "CNT=0008," in timings  # "compute work": 2 per task, 8 in all


@pytest.mark.slow
def test_time_randomize_varies_compute_times_and_parts(tmp_path):
    run = run_macsio(tmp_path, "--parallel_file_mode", "MIF", "2", "--part_size", "4000",
                     "--vars_per_part", "1", "--num_dumps", "4", "--compute_time", "0.2", "--time_randomize",
                     "--avg_num_parts", "1.5")
    seconds = [s for done in work_phases(tmp_path).values() for _, s, _ in done]
    assert len(seconds) == 4 * 3
    assert all(0.1 <= s < 2.0 for s in seconds)  # 0.2 s x 0.5 to 1.5 (and some slack for a loaded machine)
    assert max(seconds) - min(seconds) > 0.05  # 12 draws: not all the same
    counts = [int(n) for n in re.search(r"parts per task: (.*)", run.proc.stdout).group(1).split()]
    assert sorted(counts) == [1, 1, 2, 2]  # K or K+1, 6 parts in all
    for r, n in enumerate(counts):
        assert sum(len(run.writes_of(r, data_file(r // 2, d))) for d in range(4)) == 4 * n + 4 * (r % 2 == 0)


def test_part_seed_deals_k_or_k_plus_one_parts_at_random(tmp_path):
    run = run_macsio(tmp_path, "--parallel_file_mode", "MIF", "2", "--part_size", "4000",
                     "--vars_per_part", "2", "--num_dumps", "1", "--meta_size", "0",
                     "--avg_num_parts", "2.75", "--part_seed", "7")
    # 2.75 x 4 = 11 parts: 3 ranks get 3 (75%), one gets 2; seed 7 picks rank 1 (evenly dealt: 2 3 3 3)
    counts = [3, 2, 3, 3]
    assert "macsio: MIF 2, 4 ranks, 1 dumps, 11 parts x 2 vars" in run.proc.stdout
    assert "macsio: parts per task: 3 2 3 3" in run.proc.stdout
    for r in range(4):
        assert [w["bytes"] for w in run.writes_of(r, data_file(r // 2, 0))] == [4000] * 2 * counts[r]
    assert run.bytes_per_file() == {data_file(0, 0): 5 * 8000, data_file(1, 0): 6 * 8000}
    assert "macsio: read-back OK (88000 bytes in 2 files)" in run.proc.stdout


def test_root_file_says_where_every_part_is(tmp_path):
    run = run_macsio(tmp_path, "--parallel_file_mode", "MIF", "2", *BASE, "--root-file", name="pvfs2")
    roots = {f"/pvfs2/macsio_mpiio_root_{d:03d}.json" for d in (0, 1)}
    coll = [c for c in run.of("MPI_File_write_at_all") if c["file"] in roots]
    assert len(coll) == 8 and all(c["comm_size"] == 4 for c in coll)  # one collective write per rank and dump
    root_bytes = sum(c["bytes"] for c in coll)
    verdict = f"macsio: root files OK (2 files, {root_bytes} bytes, 6 parts each, 0 entries wrong)"
    assert verdict in run.proc.stdout
    assert sum(c["bytes"] for c in run.of("MPI_File_read_at") if c["file"] in roots) == root_bytes

    # outside the mount (real MPI-IO): read the root file and the data files here
    real = tmp_path / "real"
    real.mkdir()
    run = run_macsio(tmp_path, "--parallel_file_mode", "SIF", "2", *BASE, "--num_dumps", "1", "--root-file",
                     "--directory", real, name="real")
    doc = json.loads((real / "macsio_mpiio_root_000.json").read_text())
    files = [data_file(g, 0, str(real)) for g in (0, 1)]
    assert [(f["file"], f["bytes"], f["tasks"], f["parts"]) for f in doc["files"]] == [
        (files[0], 36100, [0, 2], [0, 3]), (files[1], 36100, [2, 2], [3, 3])]
    assert [Path(name).stat().st_size for name in files] == [36100, 36100]
    owner = {0: 0, 1: 1, 2: 1, 3: 2, 4: 3, 5: 3}
    assert [(p["part"], p["task"], p["file"]) for p in doc["parts"]] == [
        (p, owner[p], files[p // 3]) for p in range(6)]
    # SIF: variable-major in each file, after the 100-byte header: var v of the file's part i at
    # 100 + (3 v + i) x 4000
    for p in doc["parts"]:
        assert p["arrays"] == [[f"var{v:03d}", 100 + (3 * v + p["part"] % 3) * 4000, 4000] for v in range(3)]
    # the header and the listed arrays tile each file exactly
    for name in files:
        listed = [(a[1], a[2]) for p in doc["parts"] if p["file"] == name for a in p["arrays"]]
        spans = sorted([(0, 100)] + listed)
        assert all(a + n == b for (a, n), (b, _) in zip(spans, spans[1:]))
        assert sum(n for _, n in spans) == 36100


TIMER = re.compile(r"TOT=\s*([\d.]+),CNT=(\d+),MIN=\s*([\d.]+)\(([\d.]+)\):(\d+),AVG=\s*([\d.]+),"
                   r"MAX=\s*([\d.]+)\(([\d.]+)\):(\d+),DEV=([\d.]+),VAR=(\S+?):FILE=macsio.py:LAB=(.*?):::")


TIMER_FIELDS = ("tot", "cnt", "min", "min_sd", "min_rank", "avg", "max", "max_sd", "max_rank", "dev", "var")


def timers(lines: list[str]) -> dict[str, dict]:
    """The timers of a timings file's lines, by label: their fields (numbers)."""
    out = {}
    for line in lines:
        m = TIMER.search(line)
        if m:
            values = [float(v) for v in m.groups()[:11]]
            out[m.group(12)] = dict(zip(TIMER_FIELDS, values))
    return out


def test_log_and_timings_files_hold_each_task_and_the_reduced_timers(tmp_path):
    run = run_macsio(tmp_path, "--parallel_file_mode", "MIF", "2", *BASE[2:], "--num_dumps", "3")
    total = 3 * 2 * (100 + 9 * 4000)
    assert f"macsio: total bytes {total} " in run.proc.stdout
    # the log: 4 groups of 1 + 64 lines of 128 characters (MACSio's defaults), each task's own messages
    path = run.cwd / "macsio-log.log"
    assert path.stat().st_size == 4 * 65 * 128
    assert {len(line) for line in path.read_text().splitlines()} == {127}
    log = log_sections(path)
    assert sorted(log) == [0, 1, 2, 3]
    for lines in log.values():
        assert [line.split(":")[3] for line in lines[:4]] == ["Dump 00 BW", "Dump 01 BW", "Dump 02 BW",
                                                             "Overall BW"]
        assert all(re.match(r'Info:"macsio\.py":\d+:', line) and line.endswith(":::") for line in lines)
    assert any(f"Total Bytes: {total / 1024:8.4f} Ki; Last finisher - First starter = " in x for x in log[0])
    assert any(line.startswith('Info:"macsio.py":') and ":Summed  BW:" in line for line in log[0])

    # the timings: each task's timers, then (task 0) the timers reduced over the tasks
    sections = log_sections(run.cwd / "macsio-timings.log")
    cut = sections[0].index("Reduced Timers...")
    tasks = {r: timers(lines[:cut] if r == 0 else lines) for r, lines in sections.items()}
    reduced = timers(sections[0][cut + 1:])
    assert sorted(reduced) == sorted(tasks[0]) == ["heavy dump", "main", "read back"]
    for label, red in reduced.items():
        mine = [tasks[r][label] for r in range(4)]
        assert [t["cnt"] for t in mine] == [3 if label == "heavy dump" else 1] * 4
        assert red["cnt"] == sum(t["cnt"] for t in mine) == (12 if label == "heavy dump" else 4)
        assert red["min"] <= red["avg"] <= red["max"] and red["var"] >= 0
        assert math.isclose(red["dev"], math.sqrt(red["var"]), rel_tol=1e-3, abs_tol=1e-6)
        assert red["tot"] == pytest.approx(sum(t["tot"] for t in mine), abs=5e-5)
        assert red["avg"] == pytest.approx(red["tot"] / red["cnt"], abs=1e-5)
        assert red["min"] == min(t["min"] for t in mine) and red["max"] == max(t["max"] for t in mine)
        assert tasks[int(red["min_rank"])][label]["min"] == red["min"]
        assert tasks[int(red["max_rank"])][label]["max"] == red["max"]
        for t in mine:
            assert t["min"] <= t["avg"] <= t["max"] and t["var"] >= 0
