"""The one definition of every log column (client and server), the file metadata and the row builders.

Writers (``callid.trace``, ``server_sim.events``, ``pipeline.synth``) build rows by
column name with :attr:`Table.row`; readers (``pipeline.load``) validate against
:attr:`Table.schema`.  Times are int64 nanoseconds on the writer's own clock,
named by the ``clock`` column.  CallIDs are uint64; the all-ones value of the
run's layout (file metadata ``callid.layout``) means "no CallID".
"""

from __future__ import annotations

import json
import operator
from collections import namedtuple
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

#: ``namedtuple`` with names known only when the schema is declared (as a type checker cannot see them)
_namedtuple: Callable[..., type] = namedtuple

__all__ = [
    "CLIENT", "CLIENT_SCHEMA", "DISK_LAYERS", "DISK_LAYERS_SQL", "KIND_CLIENT", "KIND_SERVER", "LOGS",
    "SCHEMAS", "SERVER", "SERVER_SCHEMA", "Column", "Table", "file_metadata",
]

#: 2: the server log says each CallID's bytes of an event (``callid_bytes``) and the file range of
#: a Trove data operation (``file_offset``, ``file_end``).
#: 3: the client log has the phases of collective calls (kind 'phase') and an rpc's CallIDs (callids).
#: 4: a replayed call says where it came from (``origin``) and what the replay inferred (``inferred``);
#: the client log's metadata may name the replayed source (``callid.source``); a call records the
#: hints it passed (``hints``) and a non-contiguous access its file ranges (``region_offsets``,
#: ``region_lengths``), so that a traced run can be replayed; what the usage checks need (``callid
#: check``): the access mode of an open, a call's communicator, a view's types, a seek's whence,
#: the atomicity set, and the non-I/O MPI collectives (kind 'mpi', e.g. MPI_Barrier).
#: 5: the server log says an event's bytes no call owns (``holes``: read-modify-write gaps); the
#: client log's ``origin`` 'posix' (a POSIX call on the FUSE mount outside any MPI-IO call).
#: 6: a replayed call says when it ran in the source (``src_t_start``, ``src_t_end``) and how late it
#: started (``lag``); the source's job in the metadata (``callid.job.*``).
#: 7: the server log says each call's own bytes of an event (``callid_own``) beside its share.
#: 8: the client log says the rank's thread of each call (``thread``), a seek's offset as passed
#: (``relative_offset``; ``offset``: where the pointer moved) and a file's size at open (``file_size``).
#: 9: the client log has the point-to-point calls of the ranks (kind 'mpi', not collective: ``peer``,
#: ``tag``) and says a non-I/O call's count, datatype, bytes and root (``root``).
#: 10: the client log says what the tracer found wrong in a call's datatypes (``type_issues``) and the
#: communicators the ranks made, with their members (``members``), and each datatype of a rank's calls once
#: (kind 'type': ``type_id``, ``integers``, ``addresses``, ``types``; the calls' ``type_ids``).
#: 11: the client log has the MPI calls made inside a traced MPI call when the run logs them (kind
#: 'nested', ``depth``).
SCHEMA_VERSION = "11"

# Key/value metadata every log file carries (bytes keys, as Parquet stores them).
META_SCHEMA_VERSION = "callid.schema_version"
META_KIND = "callid.kind"  # "client" or "server"
META_LAYOUT = "callid.layout"  # e.g. "64/23"
META_RUN_ID = "callid.run_id"
META_CONFIG = "callid.config"  # JSON of the run configuration
META_SOURCE = "callid.source"  # what a replay replayed (e.g. the Darshan log); absent for a traced run
#: what a replay says of its source (inferred, left out, incomplete): a JSON list of lines
META_SOURCE_NOTES = "callid.source_notes"
#: prefix of the keys of what a replay's source says of its job (``callid.job.jobid``, ...; in the
#: merged run table ``client.job.jobid``, ...: see callid.replay.darshan.DarshanLog.job)
META_JOB_PREFIX = "callid.job."
#: a whole log file's CRC-32 (8 hex digits; see callid_core.checksum), in the footer of a log written
#: whole (not of the parts a run writes as it goes)
META_CHECKSUM = "callid.crc32"

KIND_CLIENT = "client"
KIND_SERVER = "server"


def server_log_stem(server: str) -> str:
    """The stem of a server's log parts (``server-io0.000000.parquet``, ...)."""
    return f"{KIND_SERVER}-{server}"


@dataclass(frozen=True)
class Column:
    """One column: its name, Arrow type, one-line doc, unit, and the value a row builder defaults to."""

    name: str
    type: pa.DataType
    doc: str
    unit: str = ""
    nullable: bool = True
    default: Any = None


def _repeated(value: Any, kind: pa.DataType, n: int) -> pa.Array:
    """``n`` times ``value`` (pyarrow repeats a list scalar row by row: 3 M empty lists took 0.7 s)."""
    if pa.types.is_list(kind) and not value:
        offsets = pa.repeat(pa.scalar(0, pa.int32()), n + 1)
        return pa.ListArray.from_arrays(offsets, pa.array([], kind.value_type))
    return pa.repeat(pa.scalar(value, kind), n)


class Table:
    """A declared table: its columns and their Arrow schema (doc and unit in the field metadata).

    Rows are built by column name, never by position: :attr:`row` is a named tuple type
    (keywords, the columns' defaults for the rest); :attr:`row_of` reads a row off an object
    that has every column as an attribute (one C call: the client's per-call path)."""

    def __init__(self, name: str, doc: str, columns: list[Column]) -> None:
        self.name = name
        self.doc = doc
        self.columns = tuple(columns)
        self.names = tuple(c.name for c in columns)
        self.schema = pa.schema([
            pa.field(c.name, c.type, nullable=c.nullable,
                     metadata={"doc": c.doc, **({"unit": c.unit} if c.unit else {})})
            for c in columns
        ])
        self.row = _namedtuple(f"{name.title().replace('_', '')}Row", self.names,
                              defaults=[c.default for c in columns])
        self.row_of = operator.attrgetter(*self.names)

    def arrow(self, n: int, columns: Mapping[str, Any]) -> pa.Table:
        """A table of ``n`` rows from columns given by name (arrays); absent ones take their default."""
        unknown = set(columns) - set(self.names)
        if unknown:
            raise KeyError(f"{self.name}: no column {', '.join(sorted(unknown))}")
        return pa.table({
            c.name: columns[c.name] if c.name in columns
            else pa.nulls(n, c.type) if c.default is None or not n  # (pyarrow cannot repeat 0 lists)
            else _repeated(c.default, c.type, n)
            for c in self.columns
        }).cast(self.schema)

    def record_type(self, name: str, doc: str) -> type:
        """A mutable record of a row being filled in: every column a slot, set by keyword at
        creation (the declared defaults for the rest) or later; :attr:`row_of` reads its row.

        Its ``__init__`` is generated from the columns (as ``namedtuple`` generates its own):
        one creation and one ``row_of`` cost about 0.5 µs, a third of a keyword dict."""
        params = ", ".join(f"{n}=_d[{i}]" for i, n in enumerate(self.names))
        body = "".join(f"    self.{n} = {n}\n" for n in self.names)
        scope: dict[str, Any] = {"_d": tuple(c.default for c in self.columns)}
        exec(f"def __init__(self, {params}):\n{body}", scope)  # (code made from the declared names)
        names = self.names

        def __repr__(record: Any) -> str:
            return f"{name}({', '.join(f'{n}={getattr(record, n)!r}' for n in names)})"

        return type(name, (), {"__slots__": names, "__init__": scope["__init__"], "__repr__": __repr__,
                               "__doc__": doc})

    def __repr__(self) -> str:
        return f"Table({self.name!r}, {len(self.columns)} columns)"


NS = "ns"
BYTES = "bytes"
_ON_CLOCK = " (on the row's clock)"

CLIENT = Table("client", "one row per traced MPI call ('call'), completion ('wait'), phase of a collective "
               "call ('phase') and client->server exchange ('rpc') of every rank", [
    Column("callid", pa.uint64(), "CallID of the MPI call (all ones: not stamped); rpc: of the call it was "
           "made for (all ones: several, see callids)", nullable=False),
    Column("rank", pa.int32(), "MPI_COMM_WORLD rank", nullable=False),
    Column("thread", pa.int32(), "call: the rank's thread that made it: 0 the one that initialized MPI, "
           "then 1, 2, ... in the order of their first traced call (null: not recorded, e.g. a replay's)"),
    Column("clock", pa.string(), "clock domain of the times", nullable=False),
    Column("kind", pa.string(), "'call': one traced MPI call; 'wait': completion of a non-blocking "
           "call (same rid); 'phase': one phase of a collective call on this rank (op names it, callid is "
           "the call's); 'rpc': one client->server exchange; 'mpi': one MPI call without I/O on a traced "
           "communicator, collective (e.g. MPI_Barrier) or point to point (MPI_Send, MPI_Recv, ...; a "
           "non-blocking one when it is issued, and its completion: the completing call, e.g. MPI_Wait, "
           "with the request's rid and, a receive, the source, tag and count matched; not stamped): its "
           "count, datatype and bytes (size) those of the data it sends (a receive: received); 'source': "
           "a replay's cross-layer arrow, one "
           "POSIX operation of the source job (a DXT_POSIX segment) and a replayed MPI-IO call it served "
           "(callid: the call's; rank: the rank that made the operation; func: read or write; offset, size: "
           "the operation's; bytes: the call's bytes in it; src_t_start, src_t_end: its times in the job; "
           "inferred: 'link', or 'link,ambiguous' when it fits several calls' windows; t_start, t_end: "
           "when the replay logged it); 'type': one datatype of the rank's calls, logged once, at its "
           "first use (HDTrace's datatype map): type_id, func its combiner (MPI_COMBINER_VECTOR, ...; "
           "MPI_COMBINER_NAMED: a predefined type), datatype its description, integers, addresses and "
           "types its constructor's arguments, size, extent; 'nested': an MPI call the MPI-IO made inside "
           "the traced call whose CallID the row has (HDTrace's nested calls, logged when the run's "
           "--trace-nested is on): its depth and what an 'mpi' row says of it", nullable=False,
           default="call"),
    Column("func", pa.string(), "MPI function, e.g. MPI_File_write_at", nullable=False),
    Column("file", pa.string(), "the file's name in one spelling (ROMIO's prefix such as pvfs2: removed, "
           ". and // resolved; absolute for a traced Python program)"),
    Column("fid", pa.int64(), "per-rank id of the open file"),
    Column("offset", pa.int64(), "absolute file offset of the first byte accessed (phase 'io': of the "
           "cycle's extent; set_view: the displacement; seek: the byte offset the file pointer moved to; a "
           "call with explicit offset that failed: the offset passed)", BYTES),
    Column("size", pa.int64(), "bytes requested (phase 'io': the length of the cycle's extent; set_size, "
           "preallocate: the size passed)", BYTES),
    Column("count", pa.int64(), "count argument"),
    Column("datatype", pa.string(), "datatype argument (as etype describes a type)"),
    Column("bytes", pa.int64(), "bytes transferred (phase 'exchange': data bytes this rank sent to "
           "the others; 'io': the calls' data bytes the cycle moved)", BYTES),
    Column("collective", pa.bool_(), "collective call"),
    Column("coll_seq", pa.int64(), "sequence number of a collective call, equal on every rank"),
    Column("rid", pa.int64(), "request id linking a non-blocking/split call to its completion (point to "
           "point: an MPI_Isend's or MPI_Irecv's row to the row of the call that completed it, MPI_Wait, "
           "MPI_Testall, ...)"),
    Column("t_start", pa.int64(), "call entered / phase began / request sent" + _ON_CLOCK, NS,
           nullable=False),
    Column("t_end", pa.int64(), "call returned / phase ended / final response received" + _ON_CLOCK, NS,
           nullable=False),
    Column("error", pa.string(), "error message, null on success"),
    Column("hints", pa.string(), "open, set_view, set_info, delete: the MPI_Info hints passed, "
           "'key=value;key=value' (null: none)"),
    Column("amode", pa.string(), "open: the access mode passed, its MPI_MODE_* flags without the prefix, "
           "e.g. 'RDWR,CREATE'"),
    Column("comm_size", pa.int32(), "collective call: the size of its communicator (the file's, for "
           "file calls)"),
    Column("comm_id", pa.int64(), "collective call: its communicator's group, the same id on every rank "
           "of it (a hash of its MPI_COMM_WORLD ranks); point-to-point: the communicator's"),
    Column("peer", pa.int32(), "point-to-point call: the other rank, in the call's communicator (a receive "
           "from MPI_ANY_SOURCE: the one it received from)"),
    Column("tag", pa.int32(), "point-to-point call: the message's tag (a receive of MPI_ANY_TAG: the one "
           "received)"),
    Column("root", pa.int32(), "rooted collective without I/O (MPI_Bcast, MPI_Gather, MPI_Scatter, "
           "MPI_Reduce): the root, in the call's communicator"),
    Column("depth", pa.int32(), "kind 'nested': how deep inside the program's MPI call it was made (1: by "
           "the call itself)"),
    Column("members", pa.list_(pa.int32()), "communicator constructor (MPI_Comm_dup, MPI_Comm_split, "
           "MPI_Comm_split_type, MPI_Comm_create, MPI_Comm_create_group; kind 'mpi', collective): the "
           "MPI_COMM_WORLD ranks of the communicator it made on this rank, in its rank order, whose size "
           "and id are the row's comm_size and comm_id (a rank that made none, MPI_COMM_NULL, logs no row; "
           "other rows: empty)", nullable=False, default=()),
    Column("type_ids", pa.list_(pa.int64()), "call (and call without I/O, kind 'mpi'): the rank's ids of "
           "the datatypes it passed (kind 'type' rows), in the order datatype, or etype then filetype "
           "(set_view)", nullable=False, default=()),
    Column("type_id", pa.int64(), "kind 'type': the id of the datatype described, the rank's (1, 2, ... in "
           "the order of first use; a type's parts before it)"),
    Column("integers", pa.list_(pa.int64()), "kind 'type': the integer arguments of its constructor, as "
           "MPI_Type_get_contents returns them (counts, block lengths, displacements in elements, ...; a "
           "type of MPI 4's large-count constructors: its large counts after them, as "
           "MPI_Type_get_contents_c)",
           nullable=False, default=()),
    Column("addresses", pa.list_(pa.int64()), "kind 'type': the address arguments of its constructor "
           "(displacements in bytes, a resized type's lower bound and extent)", BYTES, nullable=False,
           default=()),
    Column("types", pa.list_(pa.int64()), "kind 'type': the ids of the datatypes it was made of",
           nullable=False, default=()),
    Column("etype", pa.string(), "set_view: the etype: a predefined type's name, a derived one as the "
           "constructors it was made with down to predefined types, e.g. struct(MPI_INT,resized(MPI_DOUBLE)) "
           "(at most 256 characters)"),
    Column("etype_extent", pa.int64(), "set_view: the etype's extent", BYTES),
    Column("filetype", pa.string(), "set_view: the filetype (as etype); its typemap is in "
           "region_offsets/region_lengths"),
    Column("extent", pa.int64(), "set_view: the filetype's extent; kind 'type': the type's", BYTES),
    Column("datarep", pa.string(), "set_view: the data representation"),
    Column("type_issues", pa.string(), "what the tracer found wrong in the call's datatypes that only the "
           "process can see, comma-separated: 'overlapping' (a data access: the buffer's datatype, its count "
           "copies, holds some bytes more than once; set_view: the etype does), 'address' (set_view: a block "
           "of the etype or the "
           "filetype lies at an address of the process's memory above 4 GiB: built from absolute addresses); "
           "null: none"),
    Column("whence", pa.string(), "seek: 'SET', 'CUR' or 'END' (MPI_SEEK_*)"),
    Column("relative_offset", pa.int64(), "seek, seek_shared: the offset passed, in etypes relative to "
           "whence"),
    Column("file_size", pa.int64(), "open: the file's size when it was opened (0: the open created it)",
           BYTES),
    Column("atomicity", pa.bool_(), "set_atomicity: the flag"),
    Column("region_offsets", pa.list_(pa.int64()), "data access through a non-contiguous view: the "
           "file offset of each contiguous range accessed, in the order of the buffer (empty: one range, "
           "[offset, offset + size)); set_view: the byte displacement of each block of the filetype's "
           "typemap, in typemap order", BYTES, nullable=False, default=()),
    Column("region_lengths", pa.list_(pa.int64()), "the length of each range (block) of "
           "region_offsets", BYTES, nullable=False, default=()),
    Column("origin", pa.string(), "where a replayed call comes from: 'DXT_MPIIO' or 'DXT_POSIX' (a "
           "segment of that Darshan module), 'callid' (a call of a traced run), 'replay' (a call the replay "
           "adds, e.g. the open of a file); 'posix': a POSIX operation on the FUSE mount of a run on the "
           "MPI library outside any MPI-IO call (func: open, read, write, stat, ...); null: traced as it "
           "ran (an MPI call)"),
    Column("inferred", pa.string(), "what a replay inferred rather than read, comma-separated: "
           "'collective' (grouped into a collective call from the MPI-IO counters), 'contiguous' (one "
           "file range, the view unknown), 'open' (an open the log does not record), 'prefill' (a write "
           "giving a file the source reads before writing it its data), 'aggregation' (a collective call "
           "replayed with the job's aggregators and buffer size, read from the DXT_POSIX segments under its "
           "collective calls); null: nothing"),
    Column("src_t_start", pa.int64(), "a replayed call: when it started in the source run, from the source "
           "run's start; null: not replayed, or added by the replay", NS),
    Column("src_t_end", pa.int64(), "a replayed call: when it ended in the source run, from the source run's "
           "start", NS),
    Column("lag", pa.int64(), "a replayed call: how long after it was due it started (--timing asap: due "
           "when its rank's previous call ended; original: at its source time times --time-scale, and no "
           "sooner than its source gap after its rank's previous call); a collective call is entered when "
           "due or when the rank's previous call ended, then waits for the others as in the source", NS),
    Column("server", pa.string(), "rpc: server name"),
    Column("op", pa.string(), "rpc: request operation; phase: 'plan' (the allgather of the ranks' file "
           "ranges), 'exchange' (data between ranks and aggregators), 'io' (one cycle of an aggregator's "
           "I/O), 'wait' (the agreement on errors: waiting for the aggregators); on the MPI library "
           "(callid run --mpi-io romio) as its calls show them: 'plan' its collectives before any data "
           "moved, 'exchange' its point-to-point messages (request lists and data), 'io' each of its "
           "reads and writes (offset, size; bytes null), 'wait' its reductions and barriers after"),
    Column("req_seq", pa.int64(), "rpc: per-rank request id, the server's req_id"),
    Column("t_recv", pa.int64(), "rpc: request received by the server (on the server's clock)", NS),
    Column("t_send", pa.int64(), "rpc: final response sent (on the server's clock)", NS),
    Column("callids", pa.list_(pa.uint64()), "rpc: every CallID the request carries (an aggregator's: "
           "each call whose bytes it moves)", nullable=False, default=()),
])

SERVER = Table("server", "one row per server event (request, flow, Trove and metadata operation)", [
    Column("server", pa.string(), "server name", nullable=False),
    Column("clock", pa.string(), "clock domain of the times", nullable=False),
    Column("layer", pa.string(), "req, flow, trove or meta; log: the server's event mask changed "
           "(op event_mask, offset: bit i set for each layer of req, flow, trove, meta logged from then on)",
           nullable=False),
    Column("op", pa.string(), "operation, e.g. io_write, trove_write, create", nullable=False),
    Column("callid", pa.uint64(), "CallID of the request (all ones: none or several)", nullable=False),
    Column("callids", pa.list_(pa.uint64()), "the CallIDs the event serves: all of the request's, or "
           "for a disk operation of an aggregated request the calls whose bytes it moves",
           nullable=False, default=()),
    Column("callid_bytes", pa.list_(pa.int64()), "each CallID's apportioned share of the event's bytes, "
           "aligned with callids: the event's size split among the calls in proportion to their own bytes "
           "(callid_own; integers, largest remainder) so the shares add up to size: bytes no call owns "
           "(read-modify-write holes, see holes) and bytes several calls own (the same bytes read by "
           "several calls) are split among them; empty: not known per call (several CallIDs without "
           "ownership: request-level attribution)", BYTES, nullable=False, default=()),
    Column("callid_own", pa.list_(pa.int64()), "each CallID's own bytes of the event, aligned with "
           "callids: the bytes of its data the event read or wrote (every call reading the same bytes "
           "owns them all; holes are no call's); empty: not known per call", BYTES, nullable=False,
           default=()),
    Column("holes", pa.int64(), "bytes of the event no call owns: the gaps a read-modify-write (ROMIO's "
           "data sieving, an aggregator's cycle with holes) reads and writes back unchanged, counted in "
           "callid_bytes (0: none, or not known: a request that did not say whose bytes are where)",
           BYTES, nullable=False, default=0),
    Column("rank", pa.int32(), "rank that sent the request (-1: unknown)", nullable=False, default=-1),
    Column("req_id", pa.int64(), "the client's request id (rpc req_seq)", nullable=False, default=-1),
    Column("event_id", pa.int64(), "per-server event id", nullable=False),
    Column("parent", pa.int64(), "event_id of the enclosing event (-1: none)", nullable=False, default=-1),
    Column("handle", pa.uint64(), "object handle (datafile or metafile)", nullable=False, default=0),
    Column("offset", pa.int64(), "physical offset in the bstream", BYTES, nullable=False, default=0),
    Column("file_offset", pa.int64(), "Trove data operation: offset in the file of its first byte "
           "(-1: not a data operation)", BYTES, nullable=False, default=-1),
    Column("file_end", pa.int64(), "Trove data operation: offset in the file past its last byte (the "
           "range also holds other datafiles' strips; -1: not a data operation)", BYTES, nullable=False,
           default=-1),
    Column("size", pa.int64(), "bytes the event moved (a disk operation: all of them, for every call it "
           "serves; a request or flow: the request's bytes on this server)", BYTES, nullable=False,
           default=0),
    Column("t_start", pa.int64(), "event start" + _ON_CLOCK, NS, nullable=False),
    Column("t_end", pa.int64(), "event end" + _ON_CLOCK, NS, nullable=False),
])

LOGS = {KIND_CLIENT: CLIENT, KIND_SERVER: SERVER}
CLIENT_SCHEMA = CLIENT.schema
SERVER_SCHEMA = SERVER.schema
SCHEMAS = {kind: table.schema for kind, table in LOGS.items()}

# Server-event layers whose operations are disk operations (targets of arrows).
DISK_LAYERS = ("trove", "meta")
#: The same, as a SQL list: ``layer IN ({DISK_LAYERS_SQL})``.
DISK_LAYERS_SQL = ", ".join(f"'{layer}'" for layer in DISK_LAYERS)


def file_metadata(kind: str, layout: str, run_id: str, config_json: str, source: str = "",
                  notes: Sequence[str] = (), job: Mapping[str, str] | None = None) -> dict[bytes, bytes]:
    """The key/value metadata every log file carries (``source``: what a replay replayed; ``notes``:
    what it says of it; ``job``: what the source says of its job)."""
    meta = {
        META_SCHEMA_VERSION.encode(): SCHEMA_VERSION.encode(),
        META_KIND.encode(): kind.encode(),
        META_LAYOUT.encode(): layout.encode(),
        META_RUN_ID.encode(): run_id.encode(),
        META_CONFIG.encode(): config_json.encode(),
    }
    if source:
        meta[META_SOURCE.encode()] = source.encode()
    if notes:
        meta[META_SOURCE_NOTES.encode()] = json.dumps(list(notes)).encode()
    meta |= {(META_JOB_PREFIX + k).encode(): v.encode() for k, v in (job or {}).items()}
    return meta
