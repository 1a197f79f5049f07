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

_DATA = f"{DATA_CALL_WHERE} AND file_offset IS NOT NULL AND error IS NULL"
#: the data calls: one DXT_MPIIO segment each
_CALLS = f"""
    SELECT rank, file, file_offset AS offset, size AS length, t_start, t_end, func LIKE '%read%' AS is_read,
           coalesce(collective, false) AS coll
    FROM calls WHERE {_DATA} ORDER BY t_start"""
#: the system calls: the aggregators' I/O cycles, and each contiguous region of the calls of no cycle (the
#: whole call when it has no regions), their time cut evenly among them
_POSIX = f"""
    WITH cycled AS (
        SELECT DISTINCT k.coll_seq FROM phases p JOIN calls k ON k.callid = p.callid
        WHERE p.phase = 'io' AND k.coll_seq IS NOT NULL
    ), own AS (
        SELECT rank, file, func LIKE '%read%' AS is_read, t_start, t_end,
               CASE WHEN len(coalesce(region_offsets, [])) > 0 THEN region_offsets ELSE [file_offset] END
                   AS los,
               CASE WHEN len(coalesce(region_offsets, [])) > 0 THEN region_lengths ELSE [size] END AS lens
        FROM calls WHERE {_DATA} AND (coll_seq IS NULL OR coll_seq NOT IN (SELECT coll_seq FROM cycled))
    )
    SELECT rank, file, los[k + 1] AS offset, lens[k + 1] AS length,
           t_start + (t_end - t_start) * k // len(los) AS t_start,
           t_start + (t_end - t_start) * (k + 1) // len(los) AS t_end, is_read
    FROM (SELECT *, unnest(range(len(los))) AS k FROM own)
    UNION ALL
    SELECT p.rank, k.file, p.file_offset, p.size, p.t_start, p.t_end, k.func LIKE '%read%'
    FROM phases p JOIN calls k ON k.callid = p.callid WHERE p.phase = 'io' AND p.size > 0
    ORDER BY t_start"""


def write_run_log(db: str | Path, path: str | Path) -> LogInfo:
    """Write the Darshan log of the run merged at ``db`` to ``path``."""
    with open_merged(db) as m:
        calls = m.sql(_CALLS).fetchnumpy()
        sys_calls = m.sql(_POSIX).fetchnumpy()
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

    def segments(t: dict) -> Segments:
        return Segments(np.searchsorted(np.array(files, object), t["file"]), t["rank"], t["offset"],
                        t["length"], (t["t_start"] - start) / 1e9, (t["t_end"] - start) / 1e9, t["is_read"])

    mpi, posix = segments(calls), segments(sys_calls)
    meta = np.zeros((4, len(files), ranks))
    openers = np.zeros((len(files), ranks), bool)
    for f, r, *times in opens:  # (one row per file and rank)
        if r is not None and r >= 0:
            openers[index[f], r] = True
            meta[:, index[f], r] = [(t - start) / 1e9 if t is not None else 0.0 for t in times]
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
