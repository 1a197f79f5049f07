"""``bench.darshan_log`` writes Darshan logs that PyDarshan (libdarshan-util 3.5) reads back exactly."""

from __future__ import annotations

import time
import zlib
from collections import defaultdict

import darshan
import numpy as np
import pytest
from darshan.backend import cffi_backend as backend

from bench import darshan_log as dl
from bench.darshan_log import Counters, Segments, record_id, synthetic_dxt_log, synthetic_trace, write_log

FILES = ["/scratch/run/a.dat", "/scratch/run/b.dat", "/home/user/c with space.h5"]
START = 1_700_000_123.25


def _segments(rng: np.random.Generator, n: int, nprocs: int) -> Segments:
    """``n`` random segments over FILES and ``nprocs`` ranks, in no particular order."""
    start = rng.uniform(0, 100, n)
    return Segments(file=rng.integers(0, len(FILES), n), rank=rng.integers(0, nprocs, n),
                    offset=rng.integers(0, 1 << 40, n), length=rng.integers(1, 1 << 30, n),
                    start=start, end=start + rng.uniform(0, 1, n), is_read=rng.random(n) < 0.4)


def _expected(segs: Segments) -> dict[tuple[str, int], tuple[list, list]]:
    """(path, rank) -> (writes, reads), each [(offset, length, start, end)] in the given order."""
    out: dict[tuple[str, int], tuple[list, list]] = defaultdict(lambda: ([], []))
    for f, r, o, n, s, e, rd in zip(segs.file, segs.rank, segs.offset, segs.length, segs.start, segs.end,
                                    segs.is_read):
        out[FILES[f], int(r)][int(rd)].append((int(o), int(n), float(s), float(e)))
    return dict(out)


def _as_tuples(segments: list[dict]) -> list[tuple]:
    return [(s["offset"], s["length"], s["start_time"], s["end_time"]) for s in segments]


@pytest.fixture(scope="module")
def handmade(tmp_path_factory):
    """A log written with the API: 4 ranks, 3 files, every module, per-rank and shared records."""
    rng = np.random.default_rng(7)
    nprocs = 4
    mpiio = Counters(file=[0, 0, 1, 2], rank=[0, 1, -1, 3],
                     counters={"MPIIO_COLL_OPENS": [1, 1, 4, 0], "MPIIO_INDEP_OPENS": [0, 0, 0, 1],
                               "MPIIO_COLL_WRITES": [8, 8, 32, 0], "MPIIO_INDEP_READS": [0, 0, 0, 5],
                               "MPIIO_INDEP_WRITES": [0, 0, 0, 3], "MPIIO_COLL_READS": [2, 2, 0, 0],
                               "MPIIO_SPLIT_READS": 1, "MPIIO_SPLIT_WRITES": 2, "MPIIO_NB_READS": 3,
                               "MPIIO_NB_WRITES": 4, "MPIIO_HINTS": 5, "MPIIO_VIEWS": 6,
                               "MPIIO_BYTES_READ": [1 << 20, 2 << 20, 0, 5 << 40],
                               "MPIIO_BYTES_WRITTEN": [8 << 20, 8 << 20, 1 << 35, 3],
                               "MPIIO_SLOWEST_RANK_BYTES": 12345},
                     fcounters={"MPIIO_F_WRITE_TIME": [0.5, 0.25, 3.0, 1e-9],
                                "MPIIO_F_VARIANCE_RANK_BYTES": 2.5})
    posix = Counters(file=[0, 1], rank=[-1, 2], counters={"POSIX_OPENS": [4, 1], "POSIX_WRITES": [64, 7]},
                     fcounters={"POSIX_F_READ_TIME": [1.5, 0.0]})
    dxt_mpiio, dxt_posix = _segments(rng, 500, nprocs), _segments(rng, 300, nprocs)
    path = tmp_path_factory.mktemp("log") / "hand.darshan"
    args = dict(nprocs=nprocs, exe="/usr/bin/app --input in.cfg -n 4", start_time=START,
                end_time=START + 321.5, files=FILES, mpiio=mpiio, posix=posix, dxt_mpiio=dxt_mpiio,
                dxt_posix=dxt_posix,
                metadata={"lib_ver": "3.5.0", "h": "romio_cb_write=enable;cb_nodes=2", "note": "a b=c"},
                uid=4242, jobid=987654, mounts=[("/", "rootfs"), ("/scratch", "lustre"), ("/home", "nfs")],
                hostnames=[f"node{r // 2}" for r in range(nprocs)])
    info = write_log(path, **args)
    return path, args, info


def test_the_counter_names_are_darshan_utils():
    """The counter lists the writer packs by are the ones libdarshan-util names, in its order."""
    assert list(dl.MPIIO_COUNTERS) == backend.counter_names("MPI-IO")
    assert list(dl.MPIIO_FCOUNTERS) == backend.fcounter_names("MPI-IO")
    assert list(dl.POSIX_COUNTERS) == backend.counter_names("POSIX")
    assert list(dl.POSIX_FCOUNTERS) == backend.fcounter_names("POSIX")
    assert list(dl.STDIO_COUNTERS) == backend.counter_names("STDIO")
    assert list(dl.STDIO_FCOUNTERS) == backend.fcounter_names("STDIO")


def test_the_header_is_format_3_41(handmade):
    path, _, info = handmade
    raw = path.read_bytes()
    assert raw[:8] == b"3.41\0\0\0\0" and int.from_bytes(raw[8:16], "little") == dl.MAGIC
    name_map = int.from_bytes(raw[32:40], "little")  # the job region runs from the header to the names
    job = zlib.decompress(raw[dl.HEADER_SIZE:name_map])
    assert int.from_bytes(job[:8], "little") == 4242 and job[dl.JOB_STRUCT_SIZE:].startswith(b"/usr/bin/app")
    assert info.size == len(raw) and list(path.parent.iterdir()) == [path]  # no temporary left behind
    assert info.records == {"POSIX": 2, "MPI-IO": 4, "DXT_POSIX": len(_expected(handmade[1]["dxt_posix"])),
                            "DXT_MPIIO": len(_expected(handmade[1]["dxt_mpiio"]))}
    assert info.segments == {"DXT_POSIX": 300, "DXT_MPIIO": 500}


def test_the_report_reads_back_job_names_and_every_segment(handmade):
    path, args, _ = handmade
    report = darshan.DarshanReport(str(path), read_all=False)
    job = report.metadata["job"]
    assert (job["nprocs"], job["uid"], job["jobid"], job["log_ver"]) == (4, 4242, 987654, "3.41")
    assert (job["start_time_sec"], job["start_time_nsec"]) == (1_700_000_123, 250_000_000)
    assert (job["end_time_sec"], job["end_time_nsec"]) == (1_700_000_444, 750_000_000)
    assert job["metadata"] == args["metadata"]
    assert report.metadata["exe"] == args["exe"]
    assert sorted(report.mounts) == sorted(args["mounts"])
    assert {m: (v["ver"], v["idx"]) for m, v in report.modules.items()} == {
        "POSIX": (4, 1), "MPI-IO": (3, 2), "DXT_POSIX": (1, 10), "DXT_MPIIO": (2, 11)}
    for mod in ("DXT_MPIIO", "DXT_POSIX"):
        report.mod_read_all_dxt_records(mod)
        got = {}
        for rec in report.records[mod].to_numpy():
            name = report.name_records[rec["id"]]
            assert rec["hostname"] == f"node{rec['rank'] // 2}"
            counts = (len(rec["write_segments"]), len(rec["read_segments"]))
            assert (rec["write_count"], rec["read_count"]) == counts
            got[name, rec["rank"]] = (_as_tuples(rec["write_segments"]), _as_tuples(rec["read_segments"]))
        assert got == _expected(args["dxt_mpiio" if mod == "DXT_MPIIO" else "dxt_posix"])
    assert report.name_records == {record_id(p): p for p in FILES}


def test_the_report_reads_back_mpiio_and_posix_counters(handmade):
    path, args, _ = handmade
    report = darshan.DarshanReport(str(path), read_all=False)
    for mod, table in (("MPI-IO", args["mpiio"]), ("POSIX", args["posix"])):
        report.mod_read_all_records(mod, dtype="dict")
        recs = report.records[mod].to_numpy()
        assert [(report.name_records[r["id"]], r["rank"]) for r in recs] == [
            (FILES[f], r) for f, r in zip(table.file, table.rank)]
        for i, rec in enumerate(recs):
            for column, given in (("counters", table.counters), ("fcounters", table.fcounters)):
                expect = {k: np.broadcast_to(v, len(table))[i] for k, v in given.items()}
                assert {k: v for k, v in rec[column].items() if v} == {k: v for k, v in expect.items() if v}


def test_the_backend_reads_back_the_same(handmade):
    path, args, _ = handmade
    log = backend.log_open(str(path))
    try:
        job = backend.log_get_job(log)
        assert (job["nprocs"], job["metadata"]) == (4, args["metadata"])
        assert backend.log_get_exe(log) == args["exe"]
        assert backend.log_get_name_records(log) == {record_id(p): p for p in FILES}
        mpiio = []
        while (rec := backend.log_get_generic_record(log, "MPI-IO", dtype="dict")) is not None:
            mpiio.append(rec)
        assert [r["counters"]["MPIIO_COLL_WRITES"] for r in mpiio] == [8, 8, 32, 0]
        assert [r["counters"]["MPIIO_BYTES_READ"] for r in mpiio] == [1 << 20, 2 << 20, 0, 5 << 40]
        assert [r["fcounters"]["MPIIO_F_WRITE_TIME"] for r in mpiio] == [0.5, 0.25, 3.0, 1e-9]
        assert [r["rank"] for r in mpiio] == [0, 1, -1, 3]
        got = {}
        while (rec := backend.log_get_dxt_record(log, "DXT_MPIIO")) is not None:
            got[FILES[[record_id(p) for p in FILES].index(rec["id"])], rec["rank"]] = (
                _as_tuples(rec["write_segments"]), _as_tuples(rec["read_segments"]))
        assert got == _expected(args["dxt_mpiio"])
    finally:
        backend.log_close(log)


def test_a_log_without_posix_or_dxt_posix_is_read(tmp_path):
    path = tmp_path / "small.darshan"
    segs = Segments(file=0, rank=[1, 0], offset=[4096, 0], length=4096, start=[0.5, 0.25], end=[0.75, 0.5])
    write_log(path, nprocs=2, exe="x", start_time=START, end_time=START + 1, files=["/f"],
              mpiio=Counters(0, -1, {"MPIIO_INDEP_WRITES": 2}), dxt_mpiio=segs, dxt_posix=None)
    report = darshan.DarshanReport(str(path), read_all=False)
    assert set(report.modules) == {"MPI-IO", "DXT_MPIIO"} and report.metadata["job"]["metadata"] == {}
    report.mod_read_all_dxt_records("DXT_MPIIO")
    recs = report.records["DXT_MPIIO"].to_numpy()
    assert [(r["rank"], r["hostname"], _as_tuples(r["write_segments"])) for r in recs] == [
        (0, "localhost", [(0, 4096, 0.25, 0.5)]), (1, "localhost", [(4096, 4096, 0.5, 0.75)])]


@pytest.mark.parametrize("bad", [
    dict(metadata={"k": "x" * 1024}), dict(metadata={"k": "two\nlines"}), dict(mounts=[]),
    dict(hostnames=["h" * 64]), dict(files=["/f", "/f"]), dict(exe="x" * 4000),
    dict(dxt_mpiio=Segments(file=1, rank=0, offset=0, length=1, start=0, end=1)),
    dict(dxt_mpiio=Segments(file=0, rank=1, offset=0, length=1, start=0, end=1)),
    dict(mpiio=Counters(0, 0, {"MPIIO_NO_SUCH": 1})),
])
def test_bad_input_is_refused_and_nothing_is_left(tmp_path, bad):
    args = dict(nprocs=1, exe="x", start_time=START, end_time=START + 1, files=["/f"], hostnames=["h"])
    with pytest.raises((ValueError, KeyError)):
        write_log(tmp_path / "bad.darshan", **{**args, **bad})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("pattern", ["strided", "contiguous"])
@pytest.mark.parametrize("collective", [True, False])
@pytest.mark.parametrize("fpp", [False, True])
def test_a_synthetic_run_is_consistent(pattern, collective, fpp):
    ranks, accesses, size, files = 12, 5, 3 << 20, 2
    trace = synthetic_trace(ranks=ranks, files=files, accesses=accesses, size=size, pattern=pattern,
                            collective=collective, file_per_process=fpp, ranks_per_node=4,
                            cb_buffer_size=4 << 20)
    mpi, psx = trace.dxt_mpiio, trace.dxt_posix
    assert len(mpi) == files * ranks * accesses * 2 and len(trace.files) == files * (ranks if fpp else 1)
    for seg in (mpi, psx):  # the same bytes, at MPI-IO and at POSIX level
        for rd in (False, True):
            sel = seg.is_read == rd
            assert seg.length[sel].sum() == files * ranks * accesses * size
    w = ~mpi.is_read
    k = np.tile(np.arange(accesses), files * ranks)
    r, f = mpi.rank[w], mpi.file[w]
    if fpp:
        assert (mpi.offset[w] == k * size).all() and (f == (f // ranks) * ranks + r).all()
    elif pattern == "strided":
        assert (mpi.offset[w] == (k * ranks + r) * size).all()
    else:
        assert (mpi.offset[w] == (r * accesses + k) * size).all()
    # each rank's calls follow one another, writes before reads; segments end after they start
    order = np.lexsort((mpi.start, mpi.file, mpi.rank))
    same = (mpi.rank[order][1:] == mpi.rank[order][:-1]) & (mpi.file[order][1:] == mpi.file[order][:-1])
    assert (mpi.start[order][1:][same] >= mpi.end[order][:-1][same]).all()
    assert (mpi.end > mpi.start).all() and (psx.end > psx.start).all() and mpi.start.min() > 0
    if collective and not fpp:  # two-phase: aggregators only, each piece inside one domain, no overlap
        assert set(np.unique(psx.rank)) == {0, 4, 8}
        for fi in range(files):
            for rd in (False, True):
                sel = (psx.file == fi) & (psx.is_read == rd)
                o = np.sort(psx.offset[sel])
                assert (psx.length[sel] <= 4 << 20).all() and len(np.unique(o)) == len(o)
    else:  # one system call per MPI-IO call, inside it
        assert (psx.offset == mpi.offset).all() and (psx.rank == mpi.rank).all()
        assert (psx.start >= mpi.start).all() and (psx.end <= mpi.end).all()
    c = trace.mpiio.counters
    kind, other = ("COLL", "INDEP") if collective else ("INDEP", "COLL")
    n = 1 if fpp else ranks  # ranks in a reduced (rank -1) record
    assert list(c[f"MPIIO_{kind}_WRITES"]) == [n * accesses] * len(trace.mpiio)
    assert list(c[f"MPIIO_{kind}_READS"]) == [n * accesses] * len(trace.mpiio)
    assert f"MPIIO_{other}_WRITES" not in c and f"MPIIO_{other}_READS" not in c  # zero
    assert list(trace.mpiio.rank) == (list(range(ranks)) * files if fpp else [-1] * files)
    assert c["MPIIO_COLL_OPENS" if not fpp else "MPIIO_INDEP_OPENS"] == n
    assert (c["MPIIO_BYTES_WRITTEN"] == n * accesses * size).all()
    assert (trace.posix.counters["POSIX_BYTES_READ"] == n * accesses * size).all()


def test_synthetic_per_rank_records_count_per_rank():
    trace = synthetic_trace(ranks=6, accesses=3, shared_records=False, reads=False, collective=True)
    c = trace.mpiio.counters
    assert list(trace.mpiio.rank) == list(range(6)) and list(c["MPIIO_COLL_WRITES"]) == [3] * 6
    assert not c["MPIIO_COLL_READS"].any() and c["MPIIO_MODE"] == 5 and len(trace.dxt_mpiio) == 18


def test_the_same_seed_gives_the_same_log(tmp_path):
    a = synthetic_dxt_log(tmp_path / "a.darshan", ranks=8, accesses=3, seed=3)
    b = synthetic_dxt_log(tmp_path / "b.darshan", ranks=8, accesses=3, seed=3)
    c = synthetic_dxt_log(tmp_path / "c.darshan", ranks=8, accesses=3, seed=4)
    read = [(tmp_path / n).read_bytes() for n in ("a.darshan", "b.darshan", "c.darshan")]
    assert read[0] == read[1] != read[2] and a.size == b.size and c.records == a.records


def test_a_4096_rank_log_reads_back(tmp_path, capsys):
    """4096 ranks x 16 collective 1 MiB accesses, written and read back (the time is printed)."""
    path = tmp_path / "big.darshan"
    began = time.perf_counter()
    info = synthetic_dxt_log(path, ranks=4096, accesses=16, size=1 << 20)
    took = time.perf_counter() - began
    with capsys.disabled():
        print(f"\n4096 ranks x 16 accesses: written in {took:.2f} s, {info.size:,} bytes on disk")
    assert info.segments == {"DXT_MPIIO": 4096 * 16 * 2, "DXT_POSIX": 256 * 16 * 2}  # one aggregator a node
    log = backend.log_open(str(path))
    try:
        assert backend.log_get_job(log)["nprocs"] == 4096
        for mod in ("DXT_MPIIO", "DXT_POSIX"):
            records = segments = 0
            while (rec := backend.log_get_dxt_record(log, mod)) is not None:
                records += 1
                segments += len(rec["write_segments"]) + len(rec["read_segments"])
            assert (records, segments) == (info.records[mod], info.segments[mod])
        rec = backend.log_get_generic_record(log, "MPI-IO", dtype="dict")
        assert rec["rank"] == -1 and rec["counters"]["MPIIO_COLL_WRITES"] == 4096 * 16
    finally:
        backend.log_close(log)


def test_the_command_line_writes_and_says_what(tmp_path, capsys):
    out = tmp_path / "cli.darshan"
    assert dl.main([str(out), "--ranks", "32", "--accesses", "4", "--size", "64KiB", "--independent",
                    "--pattern", "contiguous", "--gap", "5ms"]) == 0
    text = capsys.readouterr().out
    assert f"wrote {out}: 32 ranks, 1 file" in text and "DXT_MPIIO 32 records, 256 segments" in text
    report = darshan.DarshanReport(str(out), read_all=False)
    assert report.metadata["job"]["nprocs"] == 32 and "-b 262144 -t 65536" in report.metadata["exe"]
