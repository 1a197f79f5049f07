"""A Darshan log's counters as DuckDB tables: what ``callid insights LOG.darshan`` decides from.

PyDarshan's darshan-util reads the log (in a child process: :mod:`callid_core.darshan_file`).  Each
counter module the insights use (:data:`MODULES`) becomes one table, a row per record (a file on one
rank, or on every rank: ``rank`` -1, Darshan's shared record), with ``id``, ``rank``, ``file`` (the
record's path) and every counter and floating-point counter of the module under Darshan's own name
(``POSIX_READS``, ``MPIIO_F_META_TIME``, ...).  A module the log lacks is an empty table with the
same columns, so every query runs.  ``job`` holds the job's record (key, value): ``nprocs``,
``run_time_s``, ``exe``, ``jobid``, ``modules`` and the metadata Darshan stored (``metadata.h``: the
hints it wrote its log with, ``metadata.lib_ver``); ``hosts`` (rank, host) the host name of each rank
its DXT records name (none without DXT; their segments are not read).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pyarrow as pa

from callid_core.darshan_file import read_in_child

__all__ = ["MODULES", "TABLES", "DarshanCounters", "read_counters"]

#: the counter modules read, and the table each becomes
TABLES = {"POSIX": "posix", "MPI-IO": "mpiio", "STDIO": "stdio"}
MODULES = tuple(TABLES)
#: the DXT modules (their presence is noted: the insights do not read their segments)
DXT = ("DXT_POSIX", "DXT_MPIIO")


@dataclass
class DarshanCounters:
    """What a Darshan log holds for the insights: the job, the modules, one table per counter module."""

    path: str
    job: dict[str, str]
    #: module -> whether Darshan flagged it partial (it ran out of memory: records are missing)
    modules: dict[str, bool]
    tables: dict[str, pa.Table] = field(default_factory=dict)
    #: rank -> host name, from the DXT records (empty without DXT)
    hosts: dict[int, str] = field(default_factory=dict)

    def connect(self, con: duckdb.DuckDBPyConnection) -> None:
        """Make the tables of :data:`TABLES` and ``job`` (key, value) in ``con``."""
        for name, table in self.tables.items():
            con.register(f"_{name}_arrow", table)
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM _{name}_arrow")
            con.unregister(f"_{name}_arrow")
        for name, columns, rows in (("job", "key VARCHAR, value VARCHAR", self.job.items()),
                                    ("hosts", "rank BIGINT, host VARCHAR", self.hosts.items())):
            con.execute(f"CREATE TABLE {name} ({columns})")
            if rows:
                con.executemany(f"INSERT INTO {name} VALUES (?, ?)", sorted(rows))


def read_counters(path: str | os.PathLike[str]) -> DarshanCounters:
    """The counters of the Darshan log at ``path``; :class:`InputError` if it cannot be read."""
    job, modules, names, columns, hosts = read_in_child(path, _read)
    tables = {}
    for mod, table in TABLES.items():
        ids, ranks, counters, fcounters = columns.get(mod) or _empty(mod)
        cnames, fnames = _names(mod)
        cols = {"id": pa.array(ids, pa.uint64()), "rank": pa.array(ranks, pa.int64()),
                "file": pa.array([names.get(int(i), f"record {int(i):016x}") for i in ids], pa.string())}
        cols |= {n: pa.array(counters[:, k]) for k, n in enumerate(cnames)}
        cols |= {n: pa.array(fcounters[:, k]) for k, n in enumerate(fnames)}
        tables[table] = pa.table(cols)
    return DarshanCounters(os.fspath(path), job, modules, tables, hosts)


def _names(mod: str) -> tuple[list[str], list[str]]:
    from darshan.backend import cffi_backend as dbe

    return list(dbe.counter_names(mod)), list(dbe.fcounter_names(mod))


def _empty(mod: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    cnames, fnames = _names(mod)
    return (np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros((0, len(cnames)), np.int64),
            np.zeros((0, len(fnames)), np.float64))


def _read(dbe, log: dict, path: str) -> tuple[dict[str, str], dict[str, bool], dict[int, str], dict,
                                             dict[int, str]]:
    """(in the child) The job, the modules, the record names, each counter module's columns and the
    ranks' hosts."""
    raw = dbe.log_get_job(log)
    modules = dbe.log_get_modules(log)
    exe = dbe.log_get_exe(log)
    start = int(raw["start_time_sec"]) + int(raw.get("start_time_nsec") or 0) / 1e9
    end = int(raw["end_time_sec"]) + int(raw.get("end_time_nsec") or 0) / 1e9
    run_time = raw.get("run_time") or max(end - start, 0.0)
    job = {"nprocs": str(raw["nprocs"]), "jobid": str(raw["jobid"]), "exe": exe.strip(),
           "run_time_s": f"{run_time:g}", "modules": ",".join(modules)}
    job |= {f"metadata.{k}": str(v) for k, v in (raw.get("metadata") or {}).items()}
    columns = {}
    for mod in MODULES:
        if mod not in modules:
            continue
        ids, ranks, counters, fcounters = [], [], [], []
        while (rec := dbe.log_get_generic_record(log, mod, dtype="numpy")) is not None:
            ids.append(int(rec["id"]))
            ranks.append(int(rec["rank"]))
            counters.append(np.asarray(rec["counters"]).ravel())
            fcounters.append(np.asarray(rec["fcounters"]).ravel())
        if ids:
            columns[mod] = (np.array(ids, np.uint64), np.array(ranks, np.int64),
                            np.vstack(counters).astype(np.int64), np.vstack(fcounters).astype(np.float64))
    return job, {m: bool(i.get("partial_flag")) for m, i in modules.items()}, \
        dbe.log_get_name_records(log), columns, _hosts(dbe, log, modules)


def _hosts(dbe, log: dict, modules: dict) -> dict[int, str]:
    """Rank -> host name, from the headers of the DXT records (each record names its rank's host)."""
    ffi, lib = dbe.ffi, dbe.libdutil
    out: dict[int, str] = {}
    for mod in DXT:
        if mod not in modules:
            continue
        while True:
            buf = ffi.new("void **")
            if lib.darshan_log_get_record(log["handle"], modules[mod]["idx"], buf) < 1:
                break
            try:
                rec = ffi.cast("struct dxt_file_record *", buf[0])
                out.setdefault(int(rec.base_rec.rank), ffi.string(rec.hostname).decode(errors="replace"))
            finally:
                lib.darshan_free(buf[0])
    return out
