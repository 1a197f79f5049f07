"""What the interposition library (``callid_pmpi.c``) and the FUSE client share, defined once.

The library writes, per rank, fixed-size call records (``romio-rankNNNNNN.rec``) and their variable
parts (file ranges, strings: ``romio-rankNNNNNN.dat``) into files it maps shared, so a killed rank
loses nothing it wrote; it publishes each thread's current call in a table of slots (``slots``) that
the FUSE client reads to stamp the requests a thread's I/O causes.  :func:`c_header` writes this
module's layouts as the C header the library is built with; :func:`read_rank` turns a rank's files
into client log rows (``callid_core.schema.CLIENT``), column by column.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from callid_core.filenames import canonical
from callid_core.schema import CLIENT

__all__ = ["ENV", "FUNCS", "NSLOTS", "RECORD", "SLOT", "c_header", "read_rank", "rank_files"]

#: the environment the library reads (``callid run`` sets it): directory of its files, CallID layout,
#: whether to stamp (0: every CallID is the layout's sentinel), the slot table, the switches (hints,
#: calls without I/O, nested calls: "0" off), the straggling ranks (``rank:ns,...``: how late each comes
#: to its MPI-IO calls, a planted fault)
ENV = {"dir": "CALLID_ROMIO_DIR", "layout": "CALLID_ROMIO_LAYOUT", "stamp": "CALLID_ROMIO_STAMP",
       "slots": "CALLID_ROMIO_SLOTS", "hints": "CALLID_ROMIO_HINTS", "mpi": "CALLID_ROMIO_MPI",
       "nested": "CALLID_ROMIO_NESTED", "straggle": "CALLID_ROMIO_STRAGGLE"}
MAGIC = 0x43414C4C  # "CALL", written last: a record is whole when it carries it
VERSION = 1
#: the file ranges of an access not known (a shared file pointer, or more than MAX_REGIONS)
UNKNOWN = 0xFFFFFFFF
MAX_REGIONS = 1 << 20
NULL_LEN = 0xFFFFFFFF  # a string column's null
NSLOTS = 4096  # threads that can be in an MPI-IO call at once on one host

KINDS = ("call", "wait", "mpi", "phase", "type", "nested")
#: the phases of a collective data call, as the library sees them: its communication before its first
#: data exchange or I/O ('plan'), the data exchange between ranks ('exchange'), each read or write it
#: makes ('io'), its synchronisation after them ('wait')
PHASES = ("plan", "exchange", "io", "wait")
#: the combiners of datatypes (a 'type' row's func: MPI_COMBINER_ and the name)
COMBINERS = ("NAMED", "DUP", "CONTIGUOUS", "VECTOR", "HVECTOR", "INDEXED", "HINDEXED", "INDEXED_BLOCK",
             "HINDEXED_BLOCK", "STRUCT", "SUBARRAY", "DARRAY", "RESIZED")
#: every function the library logs, by its code in a record (the large-count ``_c`` bindings are logged
#: under their name without ``_c``)
FUNCS = (
    "MPI_File_open", "MPI_File_close", "MPI_File_delete", "MPI_File_set_size", "MPI_File_preallocate",
    "MPI_File_get_size", "MPI_File_get_group", "MPI_File_get_amode", "MPI_File_set_info", "MPI_File_get_info",
    "MPI_File_set_view", "MPI_File_get_view", "MPI_File_seek", "MPI_File_get_position",
    "MPI_File_get_byte_offset", "MPI_File_seek_shared", "MPI_File_get_position_shared",
    "MPI_File_get_type_extent", "MPI_File_set_atomicity", "MPI_File_get_atomicity", "MPI_File_sync",
    "MPI_File_get_errhandler", "MPI_File_set_errhandler", "MPI_File_call_errhandler",
    *(f"MPI_File_{verb}{suffix}" for verb in ("read", "write")
      for suffix in ("", "_at", "_shared", "_all", "_at_all", "_ordered")),
    *(f"MPI_File_i{verb}{suffix}" for verb in ("read", "write")
      for suffix in ("", "_at", "_shared", "_all", "_at_all")),
    *(f"MPI_File_{verb}{suffix}_{part}" for verb in ("read", "write")
      for suffix in ("_all", "_at_all", "_ordered") for part in ("begin", "end")),
    "MPI_Barrier", "MPI_Bcast", "MPI_Allreduce", "MPI_Reduce", "MPI_Allgather", "MPI_Gather",
    "MPI_Scatter", "MPI_Alltoall", "MPI_Group_free", "MPI_Alltoallv", "MPI_Allgatherv",
    "MPI_Send", "MPI_Ssend", "MPI_Bsend", "MPI_Rsend", "MPI_Recv", "MPI_Sendrecv", "MPI_Isend", "MPI_Issend",
    "MPI_Irecv", "MPI_Probe",
    "MPI_Comm_dup", "MPI_Comm_split", "MPI_Comm_split_type", "MPI_Comm_create", "MPI_Comm_create_group",
    "MPI_Wait", "MPI_Test", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome", "MPI_Testall", "MPI_Testany",
    "MPI_Testsome",
    *(f"MPI_COMBINER_{c}" for c in COMBINERS),
)
#: string columns, in the order their bytes follow each other (``error``: on its own, written at the end)
STRINGS = ("file", "datatype", "hints", "amode", "etype", "filetype", "datarep", "whence", "op",
           "type_issues", "members", "type_ids", "integers", "addresses", "types", "error")
#: the string columns that are lists of integers ("1,2,3") in the client log
LISTS = ("members", "type_ids", "integers", "addresses", "types")
#: nullable integer columns
INTS = ("fid", "offset", "size", "count", "bytes", "coll_seq", "rid", "comm_id", "etype_extent", "extent",
        "relative_offset", "file_size", "thread", "peer", "tag", "root", "type_id", "depth")
#: bits of ``present``: which nullable columns a record has (the rest are null)
PRESENT = (*INTS, "comm_size", "collective", "atomicity")
#: bits of ``flags``: the boolean columns' values, and whether the call returned
FLAGS = ("collective", "atomicity", "ended")

_C = {"u1": "uint8_t", "u2": "uint16_t", "u4": "uint32_t", "i4": "int32_t", "u8": "uint64_t", "i8": "int64_t"}


def _struct(fields: list[tuple[str, str]]) -> np.dtype:
    """A C struct's layout (natural alignment, size a multiple of 8) as a numpy dtype."""
    offsets, at = [], 0
    for _, fmt in fields:
        size = np.dtype(fmt).itemsize
        at = -(-at // size) * size
        offsets.append(at)
        at += size
    return np.dtype({"names": [n for n, _ in fields], "formats": ["<" + f for _, f in fields],
                     "offsets": offsets, "itemsize": -(-at // 8) * 8})


RECORD = _struct([
    ("magic", "u4"), ("kind", "u1"), ("flags", "u1"), ("func", "u2"), ("rank", "i4"), ("comm_size", "i4"),
    ("callid", "u8"), ("t_start", "i8"), ("t_end", "i8"), *((name, "i8") for name in INTS),
    ("present", "u4"), ("n_regions", "u4"), ("regions_at", "u8"), ("strings_at", "u8"), ("error_at", "u8"),
    *((f"len_{name}", "u4") for name in STRINGS),
])
#: one thread's current call: its thread id (0: a free slot), process, rank, the call's function, CallID
#: (the sentinel: none) and the index of its record in its rank's record file (all ones: not written yet)
SLOT = _struct([("tid", "i4"), ("pid", "i4"), ("rank", "i4"), ("func", "u2"), ("callid", "u8"),
                ("record", "u8")])
NO_RECORD = 2**64 - 1


def c_header() -> str:
    """The C header of these layouts and names (``callid_records.h``)."""
    def struct(name: str, dtype: np.dtype) -> list[str]:
        lines = [f"struct {name} {{"]
        for field in dtype.names:
            fmt = dtype.fields[field][0].str[1:]
            lines.append(f"    {_C[fmt]} {field};")
        lines += ["};", f"_Static_assert(sizeof(struct {name}) == {dtype.itemsize}, \"{name} layout\");"]
        for field in dtype.names:
            lines.append(f"_Static_assert(offsetof(struct {name}, {field}) == {dtype.fields[field][1]}, "
                         f"\"{name}.{field}\");")
        return lines

    lines = ["/* Generated by callid.romio.records.c_header(): do not edit. */", "#include <stddef.h>",
             "#include <stdint.h>", f"#define CALLID_MAGIC 0x{MAGIC:08X}u",
             f"#define CALLID_VERSION {VERSION}",
             f"#define CALLID_UNKNOWN 0x{UNKNOWN:08X}u",
             f"#define CALLID_MAX_REGIONS {MAX_REGIONS}",
             f"#define CALLID_NULL_LEN 0x{NULL_LEN:08X}u", f"#define CALLID_NSLOTS {NSLOTS}"]
    lines += [f"#define CALLID_ENV_{key.upper()} \"{value}\"" for key, value in ENV.items()]
    lines += [f"#define K_{name.upper()} {i}" for i, name in enumerate(KINDS)]
    lines += [f"#define F_{name[4:]} {i}" for i, name in enumerate(FUNCS)]
    lines += [f"#define S_{name.upper()} {i}" for i, name in enumerate(STRINGS)]
    lines += [f"#define PH_{name.upper()} {i}" for i, name in enumerate(PHASES)]
    lines += ["static const char *const PHASE_NAMES[] = {" + ", ".join(f'"{p}"' for p in PHASES) + "};"]
    lines += [f"#define S_COUNT {len(STRINGS)}"]
    lines += [f"#define P_{name.upper()} (1u << {i})" for i, name in enumerate(PRESENT)]
    lines += [f"#define FL_{name.upper()} (1u << {i})" for i, name in enumerate(FLAGS)]
    lines += struct("callid_rec", RECORD) + struct("callid_slot", SLOT)
    return "\n".join(lines) + "\n"


def rank_files(directory: str | os.PathLike[str], rank: int) -> tuple[Path, Path]:
    """A rank's record file and the file of its records' variable parts."""
    stem = Path(directory) / f"romio-rank{rank:06d}"
    return stem.with_suffix(".rec"), stem.with_suffix(".dat")


def records(rec_path: Path) -> np.ndarray:
    """The whole records of a record file (a killed rank's file may end in zeros)."""
    raw = np.fromfile(rec_path, dtype=np.uint8)
    recs = raw[: len(raw) // RECORD.itemsize * RECORD.itemsize].view(RECORD)
    return recs[recs["magic"] == MAGIC]


def _strings(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """Strings cut from ``data`` at ``starts`` (``NULL_LEN``: null), without a loop over the rows."""
    valid = lengths != NULL_LEN
    lens = np.where(valid, lengths, 0).astype(np.int64)
    ends = starts + lens
    if len(lens) and ends.max(initial=0) > len(data):
        raise ValueError("a record's strings reach past the end of its data file")
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    index = np.repeat(starts - offsets[:-1], lens) + np.arange(offsets[-1], dtype=np.int64)
    return pa.LargeStringArray.from_buffers(
        len(lens), pa.py_buffer(offsets), pa.py_buffer(data[index].tobytes()),
        pa.array(valid).buffers()[1], null_count=int((~valid).sum())).cast(pa.string())


def _int_lists(texts: pa.Array, kind: pa.DataType) -> pa.Array:
    """Comma-separated integers ("0,2,4") as lists of ``kind`` (null: an empty list), columnar."""
    texts = pc.fill_null(texts, "")
    words = pc.split_pattern(texts, ",")
    lengths = pc.if_else(pc.equal(texts, ""), 0, pc.list_value_length(words)).to_numpy()
    values = pc.list_flatten(pc.filter(words, pc.not_equal(texts, "")))
    offsets = pa.array(np.r_[0, np.cumsum(lengths)], pa.int32())
    return pa.ListArray.from_arrays(offsets, values.cast(kind))


def _one_spelling(names: pa.Array) -> pa.Array:
    """Each file name as the log keeps it (callid_core.filenames; a relative one stays relative), worked
    out once per distinct name."""
    encoded = names.dictionary_encode()
    spelt = [None if n is None else canonical(n) for n in encoded.dictionary.to_pylist()]
    return pa.array(spelt, pa.string()).take(encoded.indices)


def read_rank(rec_path: Path, dat_path: Path, clock: str) -> pa.Table:
    """A rank's records as client log rows (``CLIENT``), in the order they were written.

    A call that had not returned when its rank ended has ``t_end = t_start`` and says so in ``error``.
    ``ValueError`` if the files do not fit together."""
    recs = records(rec_path)
    data = np.fromfile(dat_path, dtype=np.uint8) if dat_path.exists() else np.zeros(0, np.uint8)
    n = len(recs)
    cols: dict = {}
    for i, name in enumerate(PRESENT):
        if name in ("collective", "atomicity"):
            values = (recs["flags"] & (1 << FLAGS.index(name))) != 0
        else:
            values = recs[name]
        cols[name] = pa.array(values, mask=(recs["present"] & (1 << i)) == 0)
    ended = (recs["flags"] & (1 << FLAGS.index("ended"))) != 0
    cols["callid"] = recs["callid"]
    cols["rank"] = recs["rank"]
    cols["clock"] = pa.repeat(pa.scalar(clock), n) if n else pa.array([], pa.string())
    cols["kind"] = np.array(KINDS, dtype=object)[recs["kind"]]
    if (recs["func"] >= len(FUNCS)).any():
        raise ValueError("a record names a function this version does not know")
    cols["func"] = np.array(FUNCS, dtype=object)[recs["func"]]
    cols["t_start"] = recs["t_start"]
    cols["t_end"] = np.where(ended, recs["t_end"], recs["t_start"])
    at = recs["strings_at"].astype(np.int64)
    for name in STRINGS[:-1]:
        lengths = recs[f"len_{name}"]
        cols[name] = _strings(data, at, lengths)
        at = at + np.where(lengths != NULL_LEN, lengths, 0)
    cols["file"] = _one_spelling(cols["file"])
    for name in LISTS:
        cols[name] = _int_lists(cols[name], CLIENT.schema.field(name).type.value_type)
    error = _strings(data, recs["error_at"].astype(np.int64), recs["len_error"])
    cols["error"] = pa.array(np.where(ended, error.to_numpy(zero_copy_only=False),
                                      "the call did not return: its process ended during it"), pa.string())
    # file ranges: pairs of int64 at regions_at (none where UNKNOWN, or one range)
    count = np.where(recs["n_regions"] == UNKNOWN, 0, recs["n_regions"]).astype(np.int64)
    starts = recs["regions_at"].astype(np.int64)
    pairs = np.zeros(0, np.int64)
    if count.sum():
        words = data[: len(data) // 8 * 8].view(np.int64)
        index = np.repeat(starts // 8 - np.r_[0, np.cumsum(count)[:-1]] * 2, count) + \
            np.arange(count.sum(), dtype=np.int64) * 2
        if index.max() + 1 >= len(words):
            raise ValueError("a record's file ranges reach past the end of its data file")
        pairs = np.stack([words[index], words[index + 1]])
    offsets = pa.array(np.r_[0, np.cumsum(count)], pa.int32())
    cols["region_offsets"] = pa.ListArray.from_arrays(offsets, pa.array(pairs[0] if count.sum() else pairs))
    cols["region_lengths"] = pa.ListArray.from_arrays(offsets, pa.array(pairs[1] if count.sum() else pairs))
    return CLIENT.arrow(n, cols)
