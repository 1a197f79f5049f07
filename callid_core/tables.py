"""The declared schema of every table and view ``callid merge`` writes, with a one-line doc per column.

``pipeline.merge`` checks its output against these declarations, and the table
reference (``docs/tables.md``) is generated from them: ``python -m callid_core.tables``
prints it.  Times are int64 ns on the reference clock (rank 0's host) after alignment.
"""

from __future__ import annotations

import sys

import pyarrow as pa

from callid_core.schema import BYTES, CLIENT, LOGS, NS, SERVER, Column, Table

__all__ = ["DERIVED", "MERGED", "MPI_ONLY", "RPC_ONLY", "TYPE_ONLY", "reference_markdown"]

#: client log columns that only ``kind = 'rpc'`` rows fill (and ``op``: the name of a phase)
RPC_ONLY = ("server", "op", "req_seq", "t_recv", "t_send", "callids")
#: client log columns that only ``kind = 'mpi'`` and ``kind = 'nested'`` rows fill
MPI_ONLY = ("peer", "tag", "root", "depth", "members")
#: client log columns that only ``kind = 'type'`` rows fill
TYPE_ONLY = ("type_id", "integers", "addresses", "types")
_ALIGNED = " (on the reference clock)"


def _log(table: Table, name: str) -> Column:
    """A log column as a merged table shows it: times on the reference clock."""
    column = next(c for c in table.columns if c.name == name)
    if column.unit != NS:
        return column
    doc = column.doc.replace(" (on the row's clock)", "").replace(" (on the server's clock)", "")
    return Column(column.name, column.type, doc + _ALIGNED, NS, column.nullable)


def _client(*names: str) -> list[Column]:
    return [_log(CLIENT, n) for n in names]


CALLID = Column("callid", pa.uint64(), "CallID (null: the call was not stamped)")
CALLID_HEX = Column("callid_hex", pa.string(), "the CallID as hex digits, rank_counter "
                    "(both hex: 0x000001_0000000001a is rank 1, call 26)")
DUR = Column("dur_ns", pa.int64(), "duration: t_end - t_start (of this row alone: a sum over rows that "
             "overlap in time is work, not elapsed time)", NS)
T_REL = Column("t_rel_ns", pa.int64(), "t_start relative to the run's start (run.start_ns)", NS)
#: columns a merged table shows but does not store: computed when read from the stored ones
DERIVED = {"callid_hex": "callid_hex(callid)", "dur_ns": "t_end - t_start",
           "t_rel_ns": "t_start - run_start()"}


def _renamed(column: Column, name: str, doc: str) -> Column:
    return Column(name, column.type, doc, column.unit, column.nullable)


def _times(columns: list[Column]) -> list[Column]:
    """``columns`` with the duration and the relative start after ``t_end``."""
    at = next(i for i, c in enumerate(columns) if c.name == "t_end") + 1
    return [*columns[:at], DUR, T_REL, *columns[at:]]

CALLS = Table("calls", "one row per traced MPI call, ordered by start", _times([
    CALLID, CALLID_HEX,
    Column("counter", pa.uint64(), "the per-rank call counter of the CallID"),
    *(_renamed(c, "file_offset", "offset in the file of the first byte accessed (after the view)")
      if c.name == "offset" else c
      for c in _client(*(c.name for c in CLIENT.columns
                         if c.name not in ("callid", "kind", *RPC_ONLY, *MPI_ONLY, *TYPE_ONLY)))),
]))

RPCS = Table("rpcs", "one row per client->server exchange, ordered by start", _times([
    Column("callid", pa.uint64(), "CallID of the call the request was made for (null: several or none)"),
    CALLID_HEX,
    Column("callids", pa.list_(pa.uint64()), "every CallID the request carries: its call's, or an "
           "aggregator's, each call of the collective whose bytes it moves (the unstamped left out)"),
    *_client("rank", "clock", "func", "server", "op", "req_seq", "t_start", "t_end", "t_recv", "t_send",
             "error"),
]))

WAITS = Table("waits", "one row per completion of a non-blocking call (MPI_File_iwrite, ...), when the "
              "program waited for it or tested it complete, ordered by time", _times([
    Column("callid", pa.uint64(), "CallID of the non-blocking call completed (null: not stamped)"),
    CALLID_HEX,
    *_client("rank", "clock", "func", "file", "fid", "rid", "bytes", "t_start", "t_end"),
]))

MPI_CALLS = Table("mpi_calls", "one row per MPI call without I/O on MPI_COMM_WORLD or a communicator made "
                  "from it, ordered by start: collective (MPI_Barrier, MPI_Bcast, MPI_Allreduce, ...: the "
                  "synchronisation between ranks) or point to point (MPI_Send, MPI_Recv, MPI_Isend, ...: not "
                  "collective, with peer and tag; a non-blocking one's completion, MPI_Wait, MPI_Testall, "
                  "...: a row of the completing call with the request's rid), or a communicator's making "
                  "(MPI_Comm_split, ...: collective, with the members of the one made); and one per "
                  "MPI_Group_free of a group "
                  "MPI_File_get_group handed out (not collective; comm_id: the group's; on callid's own "
                  "MPI-IO the free is found when the rank ends: it happened between t_start, its "
                  "get_group's end, and t_end)",
                  _times([
    *_client("rank", "thread", "clock", "func", "comm_size", "comm_id", "collective", "peer", "tag", "root",
             "members", "count", "datatype", "type_ids", "size", "rid", "t_start", "t_end"),
]))

NESTED_CALLS = Table("nested_calls", "one row per MPI call the MPI-IO made inside a traced call, when the "
                     "run logged them (callid run --trace-nested; HDTrace's nested calls), ordered by start: "
                     "ROMIO's communication (point to point, collectives, completions) on --mpi-io romio, "
                     "callid's own MPI-IO's collectives on the file's communicator otherwise", _times([
    Column("callid", pa.uint64(), "CallID of the traced call it was made in (null: not stamped)"),
    CALLID_HEX,
    *_client("rank", "thread", "clock", "func", "depth", "comm_size", "comm_id", "collective", "peer", "tag",
             "root", "count", "datatype", "size", "t_start", "t_end"),
]))

DATATYPES = Table("datatypes", "one row per datatype of each rank's calls, logged once at its first "
                  "use (HDTrace's datatype map): the calls' type_ids name them; a derived type's parts "
                  "are rows too, named by its types", [
    *_client("rank", "type_id", "func", "datatype", "size", "extent", "integers", "addresses", "types",
             "t_start"),
])

PHASES = Table("phases", "one row per phase of a collective data access on each rank, ordered by start: "
               "the ranks' file ranges gathered ('plan'), data exchanged between ranks and aggregators "
               "('exchange'), each cycle of an aggregator's I/O ('io'), waiting for the aggregators "
               "('wait')", _times([
    Column("callid", pa.uint64(), "CallID of the rank's call the phase is part of (null: not stamped)"),
    CALLID_HEX,
    *_client("rank", "clock", "func"),
    Column("phase", pa.string(), "plan, exchange, io or wait"),
    Column("file_offset", pa.int64(), "phase 'io': offset in the file of the cycle's extent", BYTES),
    Column("size", pa.int64(), "phase 'io': length of the cycle's extent", BYTES),
    Column("bytes", pa.int64(), "phase 'exchange': data bytes this rank sent to the other ranks; 'io': "
           "the calls' data bytes the cycle moved", BYTES),
    *_client("t_start", "t_end", "error"),
]))

#: a disk operation's offset: in the datafile's bstream on its server, not in the file
DISK_OFFSET = "physical offset in the datafile's bstream on its server (not the offset in the file)"
FILE_OFFSET = Column("file_offset", pa.int64(), "Trove data operation: offset in the file of the first "
                     "byte it moves (null: not a data operation)", BYTES)
FILE_END = Column("file_end", pa.int64(), "Trove data operation: offset in the file past the last byte "
                  "it moves; [file_offset, file_end) also holds other datafiles' strips (null: not a data "
                  "operation)", BYTES)

SERVER_OPS = Table("server_ops", "one row per server event (request, flow, Trove and metadata operation)",
                   _times([
    *(_log(SERVER, c.name) for c in SERVER.columns[:4]),
    Column("callid", pa.uint64(), "CallID of the request (null: none or several)"),
    CALLID_HEX,
    Column("callids", pa.list_(pa.uint64()), "the CallIDs the event serves: all of the request's, or for "
           "a disk operation of an aggregated request the calls whose bytes it moves (the unstamped "
           "left out)"),
    Column("callid_bytes", pa.list_(pa.int64()), "each CallID's apportioned share of the event's bytes, "
           "aligned with callids: size split among the calls in proportion to their own bytes (callid_own), "
           "so the shares add up to size (bytes no call owns, holes, and bytes several calls own split among "
           "them); empty: not known per call (request-level attribution)", BYTES),
    Column("callid_own", pa.list_(pa.int64()), "each CallID's own bytes of the event, aligned with callids: "
           "the bytes of its data the event read or wrote (calls reading the same bytes each own them all; "
           "holes are nobody's); empty: not known per call", BYTES),
    *({"offset": _renamed(c, "disk_offset", DISK_OFFSET), "file_offset": FILE_OFFSET,
       "file_end": FILE_END}.get(c.name, c)
      for c in (_log(SERVER, c.name) for c in SERVER.columns[8:])),
]))

ARROWS = Table("arrows", "one row per call -> disk operation (Trove and metadata operations); "
               "an operation serving several calls has one row per call", _times([
    Column("callid", pa.uint64(), "CallID of the call"),
    CALLID_HEX,
    *_client("rank", "func", "file"),
    Column("call_t_start", pa.int64(), "the call's start" + _ALIGNED, NS),
    Column("call_t_end", pa.int64(), "the call's end" + _ALIGNED, NS),
    *(_log(SERVER, n) for n in ("server", "layer", "op", "handle")),
    Column("disk_offset", pa.int64(), DISK_OFFSET, BYTES, nullable=False),
    FILE_OFFSET, FILE_END,
    Column("size", pa.int64(), "the disk operation's whole size: the bytes it moved for every call it "
           "serves (summed over arrows it counts an operation once per call: sum share_bytes "
           "instead)", BYTES),
    Column("share_bytes", pa.int64(), "this call's apportioned share of the disk operation "
           "(server_ops.callid_bytes): the operation's size split among its calls in proportion to their "
           "own_bytes, so over the arrows of an operation they add up to its size and sums count each disk "
           "byte once; a call sharing bytes with others (the same bytes read by several calls) has less than "
           "its own_bytes, a call whose operation had holes more (null: not known, exact = false)", BYTES),
    Column("own_bytes", pa.int64(), "the bytes of this call's data the disk operation read or wrote "
           "(server_ops.callid_own): what the call received from it or sent to it; several calls reading "
           "the same bytes each have them all, so sums over calls count shared bytes once per call; holes "
           "are not in it (null: not known, exact = false)", BYTES),
    Column("holes", pa.int64(), "the disk operation's bytes no call owns (server_ops.holes): the gaps a "
           "read-modify-write reads and writes back unchanged; the operation's, on each of its arrows "
           "(summed over arrows it counts them once per call), in share_bytes apportioned, in no own_bytes",
           BYTES),
    Column("rmw", pa.bool_(), "the operation is a read the call's write caused: a read-modify-write "
           "(ROMIO's data sieving, an aggregator's cycle with holes) reading the extent back before "
           "writing it"),
    *(_log(SERVER, n) for n in ("t_start", "t_end", "event_id")),
    Column("n_callids", pa.int64(), "how many calls the disk operation serves (fan-in)"),
    Column("exact", pa.bool_(), "the operation names exactly the calls whose bytes it moves and their "
           "bytes; false: a request of several calls without ownership, attributed to every one of them "
           "(request level, bytes null)"),
]))

FANOUT = Table("fanout", "per call: its disk operations, servers touched and bytes per server", [
    CALLID, CALLID_HEX, *_client("rank", "func", "size"),
    Column("disk_ops", pa.int64(), "disk operations the call caused"),
    Column("servers", pa.int64(), "servers whose disks the call touched"),
    Column("share_bytes", pa.int64(), "the call's apportioned share of its disk operations (sum of "
           "arrows.share_bytes): over all calls they add up to the bytes the disk operations moved, each "
           "counted once; share_bytes / size is the amplification of a call that shares no bytes with "
           "another; operations of inexact arrows are left out", BYTES),
    Column("own_bytes", pa.int64(), "the bytes of the call's data its disk operations read or wrote (sum of "
           "arrows.own_bytes): what the call received from the disks or sent to them, equal to size when "
           "every byte reached a disk, whoever else read the same bytes; operations of inexact arrows are "
           "left out", BYTES),
    Column("inexact_arrows", pa.int64(), "disk operations attributed to the call at request level only "
           "(arrows.exact = false): their bytes are not in share_bytes or own_bytes"),
    Column("bytes_per_server", pa.list_(pa.struct([("server", pa.string()), ("ops", pa.int64()),
                                                   ("share_bytes", pa.int64()), ("own_bytes", pa.int64())])),
           "per server: disk operations and the call's share and own bytes of them, ordered by server"),
])

CLOCKS = Table("clocks", "per clock and time window: how it maps onto the reference clock "
               "(local + offset + drift * (local - t0)) and how well", [
    Column("clock", pa.string(), "clock domain (hostN, a server name)"),
    Column("source", pa.string(), "client or server"),
    Column("win", pa.int32(), "time window number, 0.."),
    Column("t_from", pa.int64(), "local time where the window's constraints start (null: none)", NS),
    Column("t_to", pa.int64(), "local time where they end", NS),
    Column("t0", pa.int64(), "local time the drift is measured from", NS),
    Column("offset_ns", pa.float64(), "offset at t0", NS),
    Column("drift_ppm", pa.float64(), "drift", "ppm"),
    Column("bound_ns", pa.float64(), "guaranteed +- error of the mapping (null: not bounded)", NS),
    Column("slack_ns", pa.float64(), "the largest least slack of the constraints (negative: infeasible)", NS),
    Column("quality", pa.string(), "reference, accurate, approximate, failed or none"),
    Column("method", pa.string(), "reference, hull, soft or identity"),
    Column("via", pa.string(), "the clocks whose constraints were used"),
    Column("constraints", pa.int64(), "causal constraints used"),
    Column("dropped", pa.int64(), "constraints dropped as gross outliers"),
    Column("violations_before", pa.int64(), "constraints violated by the logged times"),
    Column("violations_after", pa.int64(), "constraints violated after alignment"),
    Column("violation_ns", pa.float64(), "total violation left after a soft fit", NS),
])

RUN = Table("run", "the run's metadata as key/value: layout, sentinel, clock model, start_ns (the "
            "earliest start of a call or server event, the origin of every t_rel_ns), and every "
            "client.* and server.* key of the logs", [
    Column("key", pa.string(), "e.g. layout, clock_sync, start_ns, client.run_id, server.config"),
    Column("value", pa.string(), "its value, as text"),
])

EVENTS = Table("events", "(view) one timeline of calls, exchanges and server events", [
    Column("source", pa.string(), "client or server"),
    Column("lane", pa.string(), "'rank N' or the server name"),
    Column("layer", pa.string(), "mpi, rpc, or the server layer (req, flow, trove, meta)"),
    Column("name", pa.string(), "MPI function, request operation or server operation"),
    Column("callid", pa.uint64(), "CallID (null: none or several)"),
    CALLID_HEX,
    Column("t_start", pa.int64(), "start" + _ALIGNED, NS),
    Column("t_end", pa.int64(), "end" + _ALIGNED, NS),
    DUR, T_REL,
    Column("size", pa.int64(), "bytes (calls: requested; server events: moved)", BYTES),
])

SOURCE_IO = Table("source_io", "a replay of a Darshan log with both DXT layers: one row per POSIX "
                  "operation of the job (DXT_POSIX segment) and replayed MPI-IO call it served (cross-layer "
                  "arrows, inferred from time and offsets: callid.replay.layers), ordered by call", [
    CALLID, CALLID_HEX,
    Column("rank", pa.int32(), "the rank that made the POSIX operation (a collective call's: an aggregator)"),
    _log(CLIENT, "file"),
    Column("op", pa.string(), "read or write"),
    Column("file_offset", pa.int64(), "offset in the file of the operation's first byte", BYTES),
    Column("size", pa.int64(), "the operation's bytes", BYTES),
    Column("bytes", pa.int64(), "the call's bytes in it (the overlap of the call's and the operation's file "
           "ranges): each call's own, not apportioned (calls covering the same bytes each count them)",
           BYTES),
    Column("src_t_start", pa.int64(), "when the operation started in the job, from the job's start", NS),
    Column("src_t_end", pa.int64(), "when it ended in the job, from the job's start", NS),
    Column("exact", pa.bool_(), "the operation fits one call's window only (else it is linked to each call "
           "whose window it fits)"),
])

#: every table and view of a merged database, in the order they are documented
MERGED = {t.name: t for t in (CALLS, WAITS, MPI_CALLS, NESTED_CALLS, DATATYPES, RPCS, PHASES, SERVER_OPS,
                              ARROWS, FANOUT, CLOCKS, RUN, EVENTS, SOURCE_IO)}


def _type(t: pa.DataType) -> str:
    if pa.types.is_list(t):
        return f"list<{_type(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ", ".join(f"{f.name}: {_type(f.type)}" for f in t) + ">"
    return str(t)


def _markdown(table: Table) -> list[str]:
    lines = [f"## `{table.name}`", "", table.doc[0].upper() + table.doc[1:] + ".", "",
             "| column | type | unit | meaning |", "| --- | --- | --- | --- |"]
    lines += [f"| `{c.name}` | {_type(c.type)} | {c.unit} | {c.doc} |" for c in table.columns]
    return [*lines, ""]


def reference_markdown() -> str:
    """The table reference: every merged table and both logs, column by column."""
    lines = ["# Table reference", "",
             "Generated from `callid_core/tables.py` and `callid_core/schema.py` by "
             "`python -m callid_core.tables`; do not edit by hand.", "",
             "# The merged database (`callid merge`)", "",
             "Times are int64 nanoseconds on the reference clock (rank 0's host) after clock alignment.", ""]
    for table in MERGED.values():
        lines += _markdown(table)
    lines += ["# The logs (`callid run`: client.parquet, server.parquet)", "",
              "Times are int64 nanoseconds on the clock named by the row's `clock` column.", ""]
    for table in LOGS.values():
        lines += _markdown(table)
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference_markdown())
