"""The Darshan log a traced run would have left: what Drishti reads, written from callid's merged output.

So that drishti-io can be scored on the same run as ``callid insights`` (``python -m bench diagnose``):
Darshan's MPI-IO layer sees the program's data calls, its POSIX layer the system calls ROMIO makes under
them.  From the merged output:

- ``DXT_MPIIO`` and the ``MPI-IO`` counters: every data call (rank, file, offset, size, times), counted as
  collective (``MPIIO_COLL_*``) or independent (``MPIIO_INDEP_*``);
- ``DXT_POSIX`` and the ``POSIX`` counters: the aggregators' I/O cycles of collective buffering (the
  ``io`` phases: one system call per cycle's extent, as ROMIO's two-phase I/O issues them), and the
  calls with no cycle (independent ones, collectives without collective buffering), one system call per
  contiguous region; the file alignment is the run's strip size (as Darshan takes Lustre's stripe);
- open and close times from ``MPI_File_open`` / ``MPI_File_close``; each rank's host from its clock
  domain (``hostN``); Darshan's reduction of a file every rank opened to one record (rank -1).

What Darshan would see and this cannot: memory alignment (``POSIX_MEM_NOT_ALIGNED`` 0), seeks, stats.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.darshan_log import LogInfo, Segments, counters_of, write_log
from callid_core import config as C
from pipeline.domain import DATA_CALL_WHERE
from pipeline.merged import open_merged

#: the data calls (one DXT_MPIIO segment each), and whether each had I/O cycles (then its POSIX is theirs)
_CALLS = f"""
    SELECT c.rank, c.file, c.file_offset AS offset, c.size AS length, c.t_start, c.t_end,
           c.func LIKE '%read%' AS is_read, coalesce(c.collective, false) AS coll, c.region_offsets,
           c.region_lengths,
           EXISTS (SELECT 1 FROM phases p JOIN calls k ON k.callid = p.callid
                   WHERE p.phase = 'io' AND k.coll_seq = c.coll_seq AND c.coll_seq IS NOT NULL) AS cycled
    FROM calls c WHERE {DATA_CALL_WHERE} AND c.file_offset IS NOT NULL AND c.error IS NULL
    ORDER BY c.t_start"""
#: the aggregators' I/O cycles
_CYCLES = """
    SELECT p.rank, k.file, p.file_offset AS offset, p.size AS length, p.t_start, p.t_end,
           k.func LIKE '%read%' AS is_read
    FROM phases p JOIN calls k ON k.callid = p.callid
    WHERE p.phase = 'io' AND p.size > 0 ORDER BY p.t_start"""


def write_run_log(db: str | Path, path: str | Path) -> LogInfo:
    """Write the Darshan log of the run merged at ``db`` to ``path``."""
    with open_merged(db) as m:
        calls = m.sql(_CALLS).fetchnumpy()
        cycles = m.sql(_CYCLES).fetchnumpy()
        opens = m.rows("""SELECT file, rank, min(t_start) FILTER (WHERE func = 'MPI_File_open'),
                                 min(t_end) FILTER (WHERE func = 'MPI_File_open'),
                                 max(t_start) FILTER (WHERE func = 'MPI_File_close'),
                                 max(t_end) FILTER (WHERE func = 'MPI_File_close')
                          FROM calls WHERE file IS NOT NULL AND error IS NULL GROUP BY ALL""")
        hosts = dict(m.rows("SELECT rank, any_value(clock) FROM calls WHERE rank >= 0 GROUP BY rank"))
        (start, end), = m.rows("SELECT min(t_start), max(t_end) FROM calls")
        strip = int(m.config.get("strip_size") or C.DEFAULT_STRIP_SIZE)
    files = sorted({f for f, *_ in opens} | set(calls["file"].tolist()))
    index = {f: i for i, f in enumerate(files)}
    ranks = max(hosts) + 1
    secs = lambda t: (np.asarray(t, np.float64) - start) / 1e9  # noqa: E731
    fidx = np.array([index[f] for f in calls["file"]], np.int64)
    mpi = Segments(fidx, calls["rank"], calls["offset"], calls["length"], secs(calls["t_start"]),
                   secs(calls["t_end"]), calls["is_read"])
    own = ~np.asarray(calls["cycled"], bool)  # (POSIX: its contiguous regions, inside the call)
    pieces = [_regions(calls, own, fidx, secs),
              Segments([index[f] for f in cycles["file"]], cycles["rank"], cycles["offset"], cycles["length"],
                       secs(cycles["t_start"]), secs(cycles["t_end"]), cycles["is_read"])]
    posix = Segments.concat([p for p in pieces if len(p)])
    meta = np.zeros((4, len(files), ranks))
    openers = np.zeros((len(files), ranks), bool)
    for f, r, *times in opens:
        if r is not None and r >= 0:
            openers[index[f], r] = True
            meta[:, index[f], r] = [secs(t) if t is not None else 0.0 for t in times]
    shared = bool(openers.sum(axis=1).min() == ranks)  # (every file opened by every rank: one record each)
    coll = np.asarray(calls["coll"], bool)
    mpiio = counters_of("MPI-IO", mpi, meta, False, shared, ranks, {"MPIIO_COLL_OPENS": 1, "MPIIO_MODE": 9},
                      {"COLL": coll, "INDEP": ~coll})
    posix_counters = counters_of("POSIX", posix, meta, False, shared, ranks,
                                 {"POSIX_OPENS": 1, "POSIX_MODE": 0o644}, "", alignment=strip)
    return write_log(path, nprocs=ranks, exe="callid run (bench.run_log)", start_time=start / 1e9,
                     end_time=end / 1e9, files=files, mpiio=mpiio, dxt_mpiio=mpi, posix=posix_counters,
                     dxt_posix=posix, hostnames=[str(hosts.get(r) or "host0") for r in range(ranks)],
                     metadata={"lib_ver": "3.5.0"})


def _regions(calls: dict, sel: np.ndarray, fidx: np.ndarray, secs) -> Segments:
    """One system call per contiguous region of the calls ``sel`` (the whole call when it has no regions),
    spread over the call's time."""
    parts = []
    for i in np.flatnonzero(sel):
        lo = calls["region_offsets"][i]
        lengths = calls["region_lengths"][i]
        if lo is None or len(lo) == 0:
            lo, lengths = [calls["offset"][i]], [calls["length"][i]]
        t0, t1 = secs(calls["t_start"][i]), secs(calls["t_end"][i])
        cut = np.linspace(t0, t1, len(lo) + 1)
        parts.append(Segments(fidx[i], calls["rank"][i], lo, lengths, cut[:-1], cut[1:], calls["is_read"][i]))
    return Segments.concat(parts)
