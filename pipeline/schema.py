"""The one definition of every log column (client and server) and of the file metadata.

Writers (``callid.trace``, ``server_sim.events``) and readers (``pipeline.load``)
all use these schemas.  Times are int64 nanoseconds on the writer's own clock,
named by the ``clock`` column.  CallIDs are uint64; the all-ones value of the
run's layout (file metadata ``callid.layout``) means "no CallID".
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = "1"

# Key/value metadata every log file carries (bytes keys, as Parquet stores them).
META_SCHEMA_VERSION = "callid.schema_version"
META_KIND = "callid.kind"  # "client" or "server"
META_LAYOUT = "callid.layout"  # e.g. "64/23"
META_RUN_ID = "callid.run_id"
META_CONFIG = "callid.config"  # JSON of the run configuration

KIND_CLIENT = "client"
KIND_SERVER = "server"


def _f(name: str, type_: pa.DataType, doc: str, nullable: bool = True) -> pa.Field:
    return pa.field(name, type_, nullable=nullable, metadata={"doc": doc})


_NS = "ns on the row's clock"

CLIENT_SCHEMA = pa.schema(
    [
        _f("callid", pa.uint64(), "CallID of the MPI call (all ones: not stamped)", False),
        _f("rank", pa.int32(), "MPI_COMM_WORLD rank", False),
        _f("clock", pa.string(), "clock domain of the times", False),
        _f("kind", pa.string(), "'call': one traced MPI call; 'wait': completion of a non-blocking "
           "call (same rid); 'rpc': one client->server exchange", False),
        _f("func", pa.string(), "MPI function, e.g. MPI_File_write_at", False),
        _f("file", pa.string(), "file name as opened"),
        _f("fid", pa.int64(), "per-rank id of the open file"),
        _f("offset", pa.int64(), "bytes: absolute file offset of the first byte accessed"),
        _f("size", pa.int64(), "bytes requested"),
        _f("count", pa.int64(), "count argument"),
        _f("datatype", pa.string(), "datatype argument"),
        _f("bytes", pa.int64(), "bytes transferred"),
        _f("collective", pa.bool_(), "collective call"),
        _f("coll_seq", pa.int64(), "sequence number of a collective call, equal on every rank"),
        _f("rid", pa.int64(), "request id linking a non-blocking/split call to its completion"),
        _f("t_start", pa.int64(), _NS + ": call entered / request sent", False),
        _f("t_end", pa.int64(), _NS + ": call returned / final response received", False),
        _f("error", pa.string(), "error message, null on success"),
        _f("server", pa.string(), "rpc: server name"),
        _f("op", pa.string(), "rpc: request operation"),
        _f("req_seq", pa.int64(), "rpc: per-rank request id, the server's req_id"),
        _f("t_recv", pa.int64(), "rpc: ns on the server's clock: request received by the server"),
        _f("t_send", pa.int64(), "rpc: ns on the server's clock: final response sent"),
    ]
)

SERVER_SCHEMA = pa.schema(
    [
        _f("server", pa.string(), "server name", False),
        _f("clock", pa.string(), "clock domain of the times", False),
        _f("layer", pa.string(), "req, flow, trove or meta", False),
        _f("op", pa.string(), "operation, e.g. io_write, trove_write, create", False),
        _f("callid", pa.uint64(), "CallID of the request (all ones: none or several)", False),
        _f("callids", pa.list_(pa.uint64()), "all CallIDs of the request", False),
        _f("rank", pa.int32(), "rank that sent the request (-1: unknown)", False),
        _f("req_id", pa.int64(), "the client's request id (rpc req_seq)", False),
        _f("event_id", pa.int64(), "per-server event id", False),
        _f("parent", pa.int64(), "event_id of the enclosing event (-1: none)", False),
        _f("handle", pa.uint64(), "object handle (datafile or metafile)", False),
        _f("offset", pa.int64(), "bytes: physical offset in the bstream", False),
        _f("size", pa.int64(), "bytes", False),
        _f("t_start", pa.int64(), _NS, False),
        _f("t_end", pa.int64(), _NS, False),
    ]
)

SCHEMAS = {KIND_CLIENT: CLIENT_SCHEMA, KIND_SERVER: SERVER_SCHEMA}

# Server-event layers whose operations are disk operations (targets of arrows).
DISK_LAYERS = ("trove", "meta")
#: The same, as a SQL list: ``layer IN ({DISK_LAYERS_SQL})``.
DISK_LAYERS_SQL = ", ".join(f"'{layer}'" for layer in DISK_LAYERS)


def layout_bits(layout: str) -> tuple[int, int]:
    """``(total_bits, rank_bits)`` of a CallID layout written ``TOTAL/RANK`` (file metadata)."""
    total, rank = layout.split("/")
    return int(total), int(rank)


def sentinel(layout: str) -> int:
    """The all-ones CallID of a layout: "no CallID" in the logs."""
    return (1 << layout_bits(layout)[0]) - 1
