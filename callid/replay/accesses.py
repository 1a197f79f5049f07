"""What a replay replays: one row per MPI-IO data access of the source run, in a declared table."""

from __future__ import annotations

import pyarrow as pa

from callid_core.schema import BYTES, NS, Column, Table

__all__ = ["ACCESS", "READ", "WRITE"]

READ, WRITE = "read", "write"

ACCESS = Table("access", "one data access of the source run, as it will be replayed", [
    Column("rank", pa.int32(), "the source run's MPI_COMM_WORLD rank", nullable=False),
    Column("file", pa.string(), "the file's name in the source run", nullable=False),
    Column("io", pa.string(), "'read' or 'write'", nullable=False),
    Column("offset", pa.int64(), "file offset of the first byte", BYTES, nullable=False),
    Column("length", pa.int64(), "bytes accessed", BYTES, nullable=False),
    Column("t_start", pa.int64(), "start, from the source run's start", NS, nullable=False),
    Column("t_end", pa.int64(), "end, from the source run's start", NS, nullable=False),
    Column("region_offsets", pa.list_(pa.int64()), "a non-contiguous access: the file offset of each "
           "range, in the order of the buffer; empty: one range, [offset, offset + length)", BYTES,
           nullable=False, default=()),
    Column("region_lengths", pa.list_(pa.int64()), "the length of each range of region_offsets", BYTES,
           nullable=False, default=()),
    Column("coll", pa.int64(), "for an access made by a collective call: the call's number among the "
           "rank's collective calls of this file and direction (equal on every rank); null: independent"),
    Column("func", pa.string(), "the MPI function of the source run (null: not known, replayed as "
           "MPI_File_write_at/read_at, _all when collective)"),
    Column("origin", pa.string(), "where the access comes from (the client log's origin column)",
           nullable=False),
    Column("inferred", pa.string(), "what was inferred rather than read (the client log's inferred "
           "column); null: nothing"),
])
