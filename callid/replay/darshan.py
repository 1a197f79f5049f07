"""Read the accesses of a Darshan log's DXT traces (PyDarshan) into the replay's access table.

A file's accesses come from its DXT_MPIIO segments, or from its DXT_POSIX segments when it has no
DXT_MPIIO record.  DXT does not say which MPI-IO function made a segment, so two things are
inferred from the MPI-IO module's counters of the file (the rank's record, else the record shared
by all ranks):

- **collective calls**: when every write (read) of the file was collective (``MPIIO_COLL_WRITES``
  and ``MPIIO_SPLIT_WRITES`` > 0, ``MPIIO_INDEP_WRITES`` and ``MPIIO_NB_WRITES`` = 0), the k-th
  write segment of each rank is that rank's part of the k-th collective write call; where the counts
  are mixed, every access is replayed as independent (DXT does not say which ones were collective);
- **contiguous ranges**: a segment is (offset, length); after ``MPI_File_set_view``
  (``MPIIO_VIEWS`` > 0) the call may have accessed a non-contiguous range, replayed as contiguous.

Darshan records no hint values (``MPIIO_HINTS`` counts the calls that set hints; the job's ``h``
metadata holds the hints Darshan used to write its own log), so hints come from the user.

darshan-util (C) reads the log in a child process: on a damaged log it may abort (SIGABRT) or
fail in its own way, which becomes one line here instead of the end of the command.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from callid.replay.accesses import ACCESS, READ, WRITE
from callid.replay.layers import infer
from callid_core.darshan_file import read_in_child
from callid_core.errors import InputError
from callid_core.evidence import DXT_LAYERS

__all__ = ["DarshanLog", "read_log"]

MPIIO, POSIX = "DXT_MPIIO", "DXT_POSIX"
_SEGMENT = np.dtype([("offset", "<i8"), ("length", "<i8"), ("start", "<f8"), ("end", "<f8")])
#: MPI-IO counters per direction: (collective calls, independent calls)
_CALLS = {WRITE: (("MPIIO_COLL_WRITES", "MPIIO_SPLIT_WRITES"), ("MPIIO_INDEP_WRITES", "MPIIO_NB_WRITES")),
          READ: (("MPIIO_COLL_READS", "MPIIO_SPLIT_READS"), ("MPIIO_INDEP_READS", "MPIIO_NB_READS"))}
ENABLE_DXT = "run the application with DXT_ENABLE_IO_TRACE=1 in its environment (Darshan 3.2 or later)"


@dataclass
class DarshanLog:
    """What a replay takes from a Darshan log."""

    path: str
    nprocs: int
    exe: str
    start_ns: int  # the job's start (Unix time)
    accesses: pa.Table  # callid.replay.accesses.ACCESS, in no particular order
    hosts: dict[int, str]  # rank -> host name, from the DXT records
    segments: dict[str, int] = field(default_factory=dict)  # per DXT module: segments taken
    notes: list[str] = field(default_factory=list)  # what was inferred, and where
    #: the job, as the log records it: jobid, exe (with its arguments), nprocs, start, end (UTC),
    #: run_time_s, hosts, host_names, darshan_version, log_version, modules; per counter module
    #: (MPI-IO, POSIX) its totals: '<module>.bytes_read' ... (see _layer); over the files replayed, the
    #: operations DXT holds and the counters count: 'sample.reads_held', 'sample.reads_counted', ...
    job: dict[str, str] = field(default_factory=dict)
    #: per file: the hints of its collective calls the job's DXT_POSIX segments show (cb_nodes,
    #: cb_buffer_size: callid.replay.layers)
    file_hints: dict[str, dict[str, str]] = field(default_factory=dict)
    #: per file: the ranks that aggregated its collective calls in the job (the same source)
    aggregators: dict[str, list[int]] = field(default_factory=dict)
    #: the DXT_POSIX segments of the files replayed from DXT_MPIIO (ACCESS columns; None: none)
    posix: pa.Table | None = None

    def ranks_per_host(self) -> int:
        """Ranks per host when the ranks fill the hosts in blocks of one size (as ``callid run
        --ranks-per-host`` models them); 0 for one host or another placement."""
        names = sorted(set(self.hosts.values()))
        if len(names) < 2:
            return 0
        size = max(list(self.hosts.values()).count(n) for n in names)
        order = {n: min(r for r, h in self.hosts.items() if h == n) for n in names}
        first = sorted(order, key=order.get)
        return size if all(first.index(h) == r // size for r, h in self.hosts.items()) else 0


@dataclass
class _Record:
    file_id: int
    rank: int
    host: str
    writes: np.ndarray  # _SEGMENT
    reads: np.ndarray


#: what reading a log gives: job, modules, file names, exe, DXT records, MPI-IO counters, layer counters
_Read = tuple[dict, dict, dict[int, str], str, dict[str, list[_Record]], dict, dict]


def read_log(path: str | os.PathLike[str]) -> DarshanLog:
    """The accesses of the DXT traces in the Darshan log at ``path``; raise :class:`InputError`."""
    path = os.fspath(path)
    job, modules, names, exe, records, counters, layers = read_in_child(path, _read_open)
    out = DarshanLog(path, int(job["nprocs"]), exe,
                     int(job["start_time_sec"]) * 10**9 + int(job.get("start_time_nsec") or 0),
                     ACCESS.schema.empty_table(), {})
    mpiio_files = {r.file_id for r in records.get(MPIIO, [])}
    files, parts, under = _segments(out, records, names, counters, mpiio_files)
    _describe(out, job, exe, modules, names, records, layers, mpiio_files)
    if not out.segments or not any(out.segments.values()):
        raise InputError(f"{path}: the log's DXT traces hold no accesses: {ENABLE_DXT}")
    _set_accesses(out, parts, under, files)
    return out


def _read_open(dbe, log: dict, path: str) -> _Read:
    """The open log's job, modules, file names, exe, DXT records, MPI-IO counters and layer counters."""
    job = dbe.log_get_job(log)
    modules = dbe.log_get_modules(log)
    if MPIIO not in modules and POSIX not in modules:
        raise InputError(f"{path}: the log has no DXT traces (DXT_MPIIO or DXT_POSIX), only "
                         f"{', '.join(modules) or 'no modules'}: {ENABLE_DXT}")
    names = dbe.log_get_name_records(log)
    exe = dbe.log_get_exe(log)
    records = {mod: _dxt_records(dbe, log, mod) for mod in (MPIIO, POSIX) if mod in modules}
    counters = _mpiio_counters(dbe, log) if "MPI-IO" in modules else {}
    layers = {layer: _layer(dbe, log, layer) for layer in DXT_LAYERS.values() if layer in modules}
    return job, modules, names, exe, records, counters, layers


def _segments(out: DarshanLog, records: dict[str, list[_Record]], names: dict[int, str], counters: dict,
              mpiio_files: set[int]) -> tuple[list[str], list[dict], list[dict]]:
    """The files (by index), the columns of the accesses replayed and of the POSIX segments under
    MPI-IO calls; the segments taken per module, the hosts and what was inferred go into ``out``."""
    files: list[str] = []
    index: dict[int, int] = {}
    parts: list[dict] = []
    under: list[dict] = []
    for mod, recs in records.items():
        taken = [r for r in recs if mod == MPIIO or r.file_id not in mpiio_files]
        out.segments[mod] = sum(len(r.writes) + len(r.reads) for r in taken)
        if mod == POSIX:
            under += _under(recs, index, mpiio_files)
        for rec in taken:
            out.hosts.setdefault(rec.rank, rec.host)
            name = names.get(rec.file_id, f"<record {rec.file_id:016x}>")
            if rec.file_id not in index:
                index[rec.file_id] = len(files)
                files.append(name)
            parts += _record_columns(rec, mod, index[rec.file_id], name, counters, out.notes)
    return files, parts, under


def _under(recs: list[_Record], index: dict[int, int], mpiio_files: set[int]) -> list[dict]:
    """The columns of the DXT_POSIX segments of the files replayed from DXT_MPIIO (``index``: theirs)."""
    return [_columns(segs, r.rank, index[r.file_id], io, POSIX, False, None)
            for r in recs if r.file_id in index and r.file_id in mpiio_files
            for io, segs in ((WRITE, r.writes), (READ, r.reads)) if len(segs)]


def _record_columns(rec: _Record, mod: str, file_index: int, name: str, counters: dict,
                    notes: list[str]) -> list[dict]:
    """The columns of a record's writes, then its reads, with what was inferred (noted in ``notes``)."""
    out = []
    for io, segs in ((WRITE, rec.writes), (READ, rec.reads)):
        if len(segs):
            inferred = _inferred(mod, counters, rec.file_id, rec.rank, io, name, notes)
            out.append(_columns(segs, rec.rank, file_index, io, mod, *inferred))
    return out


def _describe(out: DarshanLog, job: dict, exe: str, modules: dict, names: dict[int, str],
              records: dict[str, list[_Record]], layers: dict, mpiio_files: set[int]) -> None:
    """What the log does not hold (notes) and what it says of the job into ``out``."""
    counted = {mod: layers[layer][0] for mod, layer in DXT_LAYERS.items()
               if mod in records and layer in layers}
    out.notes += _incomplete(modules, records, counted, names)
    out.job = _job(job, exe, modules, {layer: totals for layer, (_, totals) in layers.items()}, out.hosts)
    out.job |= {f"sample.{k}": str(v) for k, v in _sample(records, counted, mpiio_files).items()}


def _set_accesses(out: DarshanLog, parts: list[dict], under: list[dict], files: list[str]) -> None:
    """The accesses into ``out`` (those with a negative offset or length left out, noted), and the
    DXT_POSIX segments under MPI-IO calls with the aggregation they show."""
    table = _table(parts, files)
    valid = pc.and_(pc.greater_equal(table["offset"], 0), pc.greater_equal(table["length"], 0))
    bad = table.num_rows - pc.sum(valid).as_py()
    if bad:
        out.notes.append(f"{bad} segments with a negative offset or length left out")
    out.accesses = table.filter(valid)
    if under:
        out.posix = _table(under, files)
        _aggregation(out, out.posix)


def _aggregation(out: DarshanLog, posix: pa.Table) -> None:
    """The job's aggregation (callid.replay.layers) into ``out``: the files' hints, the collective
    calls' ``inferred`` ('aggregation'), a note per file and the job's ``aggregation`` (JSON)."""
    found = infer(out.accesses, posix)
    if not found:
        return
    out.job["aggregation"] = json.dumps(found)
    for f in found:
        hints = out.file_hints.setdefault(f["file"], {})
        hints["cb_nodes"] = str(max(len(f["aggregators"]), int(hints.get("cb_nodes", 0))))
        hints["cb_buffer_size"] = str(max(f["max_piece"], int(hints.get("cb_buffer_size", 0))))
        aggs = f["aggregators"]
        out.aggregators[f["file"]] = sorted(set(out.aggregators.get(f["file"], [])) | set(aggs))
        named = ", ".join(map(str, aggs[:8])) + (", ..." if len(aggs) > 8 else "")
        out.notes.append(f"{f['file']}: the job's {f['calls']} collective {f['io']}s went through "
                         f"{len(aggs)} aggregators (ranks {named}) in pieces of up to {f['max_piece']:,} "
                         f"bytes (its DXT_POSIX segments): replayed with these ranks, "
                         f"cb_nodes={hints['cb_nodes']}, cb_buffer_size={hints['cb_buffer_size']} "
                         "(--hint overrides)")
    acc, was = out.accesses, out.accesses["inferred"]
    files = pa.array(list(out.file_hints), pa.string())
    mark = pc.and_(pc.is_valid(acc["coll"]), pc.is_in(acc["file"], files))
    inferred = pc.if_else(mark, pc.binary_join_element_wise(was, "aggregation", ","), was)
    out.accesses = acc.set_column(acc.schema.get_field_index("inferred"), "inferred", inferred)


def _dxt_records(dbe, log: dict, mod: str) -> list[_Record]:
    """Every DXT record of ``mod``, its segments as arrays (no Python object per segment)."""
    ffi, lib = dbe.ffi, dbe.libdutil
    idx = dbe.log_get_modules(log)[mod]["idx"]
    head = ffi.sizeof("struct dxt_file_record")
    out = []
    while True:
        buf = ffi.new("void **")
        if lib.darshan_log_get_record(log["handle"], idx, buf) < 1:
            return out
        try:
            rec = ffi.cast("struct dxt_file_record *", buf[0])
            nw, nr = int(rec.write_count), int(rec.read_count)
            segs = np.frombuffer(ffi.buffer(ffi.cast("char *", buf[0]) + head, (nw + nr) * _SEGMENT.itemsize),
                                 dtype=_SEGMENT).copy()
            out.append(_Record(int(rec.base_rec.id), int(rec.base_rec.rank),
                               ffi.string(rec.hostname).decode(errors="replace"),
                               _in_order(segs[:nw]), _in_order(segs[nw:])))
        finally:
            lib.darshan_free(buf[0])


def _in_order(segs: np.ndarray) -> np.ndarray:
    return segs[np.argsort(segs["start"], kind="stable")]


def _mpiio_counters(dbe, log: dict) -> dict[tuple[int, int], dict[str, int]]:
    """(file record id, rank; -1: shared by all ranks) -> the MPI-IO counters replay uses."""
    names = dbe.counter_names("MPI-IO")
    wanted = [n for pair in _CALLS.values() for group in pair for n in group] + ["MPIIO_VIEWS"]
    cols = [names.index(n) for n in wanted]
    out = {}
    while (rec := dbe.log_get_generic_record(log, "MPI-IO", dtype="numpy")) is not None:
        values = np.asarray(rec["counters"]).ravel()
        out[(int(rec["id"]), int(rec["rank"]))] = dict(zip(wanted, (int(values[c]) for c in cols)))
    return out


#: the counters of operations (reads, writes) of each counter module
_OPERATIONS = {"MPI-IO": {READ: [n for group in _CALLS[READ] for n in group],
                          WRITE: [n for group in _CALLS[WRITE] for n in group]},
               "POSIX": {READ: ["POSIX_READS"], WRITE: ["POSIX_WRITES"]}}


#: the counters' prefix of each counter module
_PREFIX = {"MPI-IO": "MPIIO", "POSIX": "POSIX"}
#: a layer's totals in the job (``DarshanLog.job``): name -> its counters, summed over the records
_SUMS = {layer: {"bytes_read": [f"{p}_BYTES_READ"], "bytes_written": [f"{p}_BYTES_WRITTEN"],
                 "reads": _OPERATIONS[layer][READ], "writes": _OPERATIONS[layer][WRITE]}
         for layer, p in _PREFIX.items()}
_TIMES = {layer: {f"{k}_time_s": f"{p}_F_{k.upper()}_TIME" for k in ("read", "write", "meta")}
          for layer, p in _PREFIX.items()}


def _layer(dbe, log: dict, layer: str) -> tuple[dict[tuple[int, str], int], dict[str, float]]:
    """The counters of module ``layer``: (file record id, read or write) -> the operations they count
    over all ranks; and the layer's totals (bytes, operations, time summed over the ranks, and the
    span from the first read/write to the end of the last, s from the job's start)."""
    names, fnames = dbe.counter_names(layer), dbe.fcounter_names(layer)
    cols = {io: [names.index(n) for n in wanted] for io, wanted in _OPERATIONS[layer].items()}
    sums = {k: [names.index(n) for n in wanted] for k, wanted in _SUMS[layer].items()}
    times = {k: fnames.index(n) for k, n in _TIMES[layer].items()}
    spans = {io: tuple(fnames.index(f"{_PREFIX[layer]}_F_{io.upper()}_{end}_TIMESTAMP")
                       for end in ("START", "END")) for io in (READ, WRITE)}
    ops: dict[tuple[int, str], int] = {}
    totals = dict.fromkeys([*sums, *times], 0.0)
    first, last = {io: float("inf") for io in spans}, dict.fromkeys(spans, 0.0)
    while (rec := dbe.log_get_generic_record(log, layer, dtype="numpy")) is not None:
        values, fvalues = np.asarray(rec["counters"]).ravel(), np.asarray(rec["fcounters"]).ravel()
        for io, c in cols.items():
            key = (int(rec["id"]), io)
            ops[key] = ops.get(key, 0) + int(values[c].sum())
        for k, c in sums.items():
            totals[k] += int(values[c].sum())
        for k, c in times.items():
            totals[k] += float(fvalues[c])
        for io, (a, b) in spans.items():
            if fvalues[b] > 0:
                first[io], last[io] = min(first[io], float(fvalues[a])), max(last[io], float(fvalues[b]))
    for io in spans:
        totals[f"{io}_span_s"] = last[io] - first[io] if last[io] else 0.0
    return ops, totals


def _job(job: dict, exe: str, modules: dict, totals: dict[str, dict[str, float]],
         hosts: dict[int, str]) -> dict[str, str]:
    """What the log says of the job (``DarshanLog.job``)."""
    start = int(job["start_time_sec"]) + int(job.get("start_time_nsec") or 0) / 1e9
    end = int(job["end_time_sec"]) + int(job.get("end_time_nsec") or 0) / 1e9
    meta = job.get("metadata") or {}
    out = {"jobid": str(job["jobid"]), "exe": exe.strip(), "nprocs": str(job["nprocs"]),
           "start": _utc(start), "end": _utc(end), "run_time_s": f"{job.get('run_time') or end - start:g}",
           "hosts": str(len(set(hosts.values()))), "host_names": ",".join(sorted(set(hosts.values()))),
           "darshan_version": str(meta.get("lib_ver", "")), "log_version": str(job.get("log_ver", "")),
           "modules": ",".join(m + " (partial)" * bool(i.get("partial_flag")) for m, i in modules.items())}
    for layer, figures in totals.items():
        out |= {f"{layer}.{k}": f"{v:.6g}" if k.endswith("_s") else str(int(v)) for k, v in figures.items()}
    return out


def _utc(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds") if t > 0 else ""


def _sample(records: dict[str, list[_Record]], counted: dict[str, dict[tuple[int, str], int]],
            mpiio_files: set[int]) -> dict[str, int]:
    """Over the files replayed (each from its DXT module): the reads and writes the DXT traces hold
    and those the counters count (``reads_held``, ``reads_counted``, ...; none without counters)."""
    out: dict[str, int] = {}
    for mod, recs in records.items():
        if mod not in counted:
            continue
        files = {r.file_id for r in recs if mod == MPIIO or r.file_id not in mpiio_files}
        for io in (READ, WRITE):
            held = sum(len(r.reads if io == READ else r.writes) for r in recs if r.file_id in files)
            total = sum(counted[mod].get((f, io), 0) for f in files)
            out[f"{io}s_held"] = out.get(f"{io}s_held", 0) + held
            out[f"{io}s_counted"] = out.get(f"{io}s_counted", 0) + total
    return out


def _incomplete(modules: dict, records: dict[str, list[_Record]],
                counted: dict[str, dict[tuple[int, str], int]], names: dict[int, str]) -> list[str]:
    """What the log says it does not hold: modules Darshan flagged as partial (it ran out of memory for
    them), and files whose DXT traces hold fewer operations than the module's counters count."""
    notes = [f"incomplete log: Darshan flagged its {mod} data as partial (it ran out of memory for them); "
             "the replay has only what it recorded"
             for mod, info in modules.items() if info.get("partial_flag")]
    for mod, recs in records.items():
        traced: dict[tuple[int, str], int] = {}
        for r in recs:
            for io, segs in ((WRITE, r.writes), (READ, r.reads)):
                traced[(r.file_id, io)] = traced.get((r.file_id, io), 0) + len(segs)
        short = {k: (traced.get(k, 0), n) for k, n in counted.get(mod, {}).items() if traced.get(k, 0) < n}
        if short:
            held, total = sum(h for h, _ in short.values()), sum(n for _, n in short.values())
            (fid, io), (h, n) = max(short.items(), key=lambda kv: kv[1][1] - kv[1][0])
            notes.append(f"incomplete log: {mod} holds {held:,} of the {total:,} operations its counters "
                         f"count on {len(short)} file{'s' if len(short) > 1 else ''} (e.g. {h:,} of {n:,} "
                         f"{io}s of {names.get(fid, f'record {fid:016x}')}); the replay has only those it "
                         "holds")
    return notes


def _inferred(mod: str, counters: dict, file_id: int, rank: int, io: str, name: str,
              notes: list[str]) -> tuple[bool, str | None]:
    """Whether the rank's ``io`` accesses of the file were collective calls, and what was inferred."""
    if mod != MPIIO:
        return False, None
    c = counters.get((file_id, rank)) or counters.get((file_id, -1))
    if c is None:
        return False, None
    coll_names, indep_names = _CALLS[io]
    coll, indep = sum(c[n] for n in coll_names), sum(c[n] for n in indep_names)
    what = ["contiguous"] if c["MPIIO_VIEWS"] else []
    if coll and indep:
        note = (f"{name}: {io}s were {coll} collective and {indep} independent calls; "
                f"all replayed as independent (DXT does not say which were collective)")
        if note not in notes:
            notes.append(note)
    collective = bool(coll) and not indep
    if collective:
        what.insert(0, "collective")
    return collective, ",".join(what) or None


def _columns(segs: np.ndarray, rank: int, file_index: int, io: str, mod: str, collective: bool,
             inferred: str | None) -> dict[str, np.ndarray | pa.Array]:
    n = len(segs)
    return {
        "rank": np.full(n, rank, np.int32), "file": np.full(n, file_index, np.int32),
        "io": pa.repeat(pa.scalar(io), n),
        "offset": segs["offset"], "length": segs["length"],
        "t_start": np.round(segs["start"] * 1e9).astype(np.int64),
        "t_end": np.round(segs["end"] * 1e9).astype(np.int64),
        "coll": pa.array(np.arange(n, dtype=np.int64)) if collective else pa.nulls(n, pa.int64()),
        "origin": pa.repeat(pa.scalar(mod), n),
        "inferred": pa.repeat(pa.scalar(inferred, pa.string()), n),
    }


def _table(parts: list[dict], files: list[str]) -> pa.Table:
    """One access table from the per-record columns (the file names from their indices)."""
    cols = {}
    for name in parts[0]:
        chunks = [p[name] for p in parts]
        if name == "file":
            idx = pa.array(np.concatenate(chunks))
            cols[name] = pa.DictionaryArray.from_arrays(idx, pa.array(files, pa.string())).dictionary_decode()
        elif isinstance(chunks[0], np.ndarray):
            cols[name] = pa.array(np.concatenate(chunks))
        else:
            cols[name] = pa.concat_arrays(chunks)
    return ACCESS.arrow(len(cols["rank"]), cols)
