"""The named choices a user makes (clock model, output storage, renderings): one Enum each.

They are ``str`` Enums, so a member equals its name (``Storage.PARQUET == "parquet"``); the
command line shows their values as the choices of its options, the pipeline dispatches on them.
"""

from __future__ import annotations

from enum import Enum

from callid_core.errors import BadValue

__all__ = ["SERVER_LAYERS", "ClockSync", "Engine", "MpiIo", "Payload", "Readers", "RowFormat", "Storage",
           "Timing", "TraceFormat", "listed", "parse_layers"]

#: The layers of server events, in order: a request's state machine, its flows, its data operations
#: (Trove) and metadata operations.  The thesis' event mask switches each on or off (Config.server_layers
#: at the start, an event_mask request at run time).
SERVER_LAYERS = ("req", "flow", "trove", "meta")


def parse_layers(text: str, flag: str) -> list[str]:
    """The server layers of a comma-separated list ('' : none), in their order; :class:`BadValue` naming
    ``flag`` for any other name."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    wrong = [n for n in names if n not in SERVER_LAYERS]
    if wrong:
        raise BadValue(f"{flag}: {wrong[0][:40]!r} is not a server layer (one of {', '.join(SERVER_LAYERS)})")
    return [layer for layer in SERVER_LAYERS if layer in names]


class ClockSync(str, Enum):
    """How clocks are aligned: not at all, by an offset, or by an offset and a drift per time window."""

    NONE = "none"
    OFFSET = "offset"
    DRIFT = "drift"


class Storage(str, Enum):
    """How a merged output is stored: one DuckDB file, or a directory with one Parquet file per table."""

    DUCKDB = "duckdb"
    PARQUET = "parquet"


class Engine(str, Enum):
    """What runs a merge's SQL: an embedded DuckDB, or Apache Spark (local mode or a cluster)."""

    DUCKDB = "duckdb"
    SPARK = "spark"


class Readers(str, Enum):
    """Who may read what callid writes (runs, file systems, merged outputs, pages): its owner, the
    owner's group too, or every local user.  The command line sets the process' umask to match."""

    OWNER = "owner"
    GROUP = "group"
    ALL = "all"

    @property
    def umask(self) -> int:
        return {"owner": 0o077, "group": 0o027, "all": 0o022}[self.value]


class RowFormat(str, Enum):
    """How query results are printed."""

    TABLE = "table"
    CSV = "csv"
    JSON = "json"
    MARKDOWN = "markdown"


class TraceFormat(str, Enum):
    """The trace formats ``callid export`` writes."""

    CHROME = "chrome"
    PERFETTO = "perfetto"
    OTF2 = "otf2"


class Timing(str, Enum):
    """When a replay makes each call: as soon as it can (in the source's order), or at its time in the
    source run (each rank's gaps kept)."""

    ASAP = "asap"
    ORIGINAL = "original"


class MpiIo(str, Enum):
    """The MPI-IO a run's calls go through: callid's own (mpi4py programs; striping hints reach the file
    system), or the MPI library's, ROMIO (any program, on a FUSE mount; its UFS driver passes no
    striping hints on)."""

    CALLID = "callid"
    ROMIO = "romio"


class Payload(str, Enum):
    """What a file system's data operations move and store: the bytes (full), or their sizes only
    (none: requests and flows carry no data, Trove records each operation and stores nothing, files
    grow sparsely to their sizes and read back as nothing), for replays larger than the disk."""

    FULL = "full"
    NONE = "none"


def listed(choice: type[Enum]) -> str:
    """``'none, offset or drift'``: the values of a choice, for messages."""
    values = [m.value for m in choice]
    return ", ".join(values[:-1]) + " or " + values[-1] if len(values) > 1 else values[0]
