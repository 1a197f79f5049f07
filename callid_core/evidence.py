"""What a log records: the kinds of evidence the checks of ``callid check`` decide from, and which of
them each source of calls holds.

A traced run records every kind.  A replay records what its source logged, said by each replayed
call's ``origin`` (the client log's column): a Darshan DXT log only the data accesses; a traced run's
client log also the MPI function of each access.  The calls a replay adds of its own (origin
:data:`REPLAY_ORIGIN`: one open per file, prefill writes) are evidence of nothing in the source, and
a replay makes no closes, syncs, barriers, views or waits.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DXT_LAYERS", "EVIDENCE", "ORIGINS", "REPLAY_ORIGIN", "SWITCHED", "TRACED", "Source",
           "source_of_origins"]

#: every kind of evidence, by name (what a check's ``-- needs:`` header names): what it is
EVIDENCE: dict[str, str] = {
    "accesses": "the data accesses: rank, file, offset and length (or file ranges), start and end time",
    "functions": "the MPI function of each data access as the program called it (explicit offset, "
                 "individual or shared file pointer; blocking, non-blocking or split collective)",
    "collectives": "every collective file call of each rank (open, view, data access, close, ...) known as "
                   "one call of all its ranks (coll_seq), with the size of its communicator",
    "opens": "each rank's MPI_File_open: its handle, access mode and communicator, and whether it succeeded",
    "closes": "each rank's MPI_File_close",
    "views": "MPI_File_set_view: displacement, etype, filetype (its typemap) and data representation",
    "hints": "the MPI_Info hints each rank passed to open, set_info, set_view and delete",
    "completions": "the waits of non-blocking calls and the _end calls of split collectives",
    "syncs": "MPI_File_sync",
    "atomicity": "MPI_File_set_atomicity",
    "barriers": "the MPI collectives that move no file data (barriers, reductions, ...) and their "
                "communicators",
    "seeks": "MPI_File_seek, seek_shared and the file pointer queries",
    "deletes": "MPI_File_delete",
    "resizes": "MPI_File_set_size and MPI_File_preallocate",
    "errors": "the MPI error class of each call that failed, as the MPI library returned it",
    "groups": "MPI_File_get_group, and the MPI_Group_free of each group it returned",
    "buffers": "what the tracer found in the datatype of each data access's buffer (its typemap is in the "
               "program's memory alone)",
}


@dataclass(frozen=True)
class Source:
    """Where calls come from: what to call it, and the evidence (names of :data:`EVIDENCE`) it records."""

    label: str
    records: frozenset[str]

    def recorded(self) -> list[str]:
        """The evidence recorded, in the order of :data:`EVIDENCE`."""
        return [e for e in EVIDENCE if e in self.records]

    def missing(self, needs: tuple[str, ...]) -> list[str]:
        """What of ``needs`` the source does not record, in their order."""
        return [e for e in needs if e not in self.records]

    def switched(self, config: dict) -> Source:
        """The source as a run with ``config`` (its ``Config`` as JSON) records it: without the evidence
        of the tracers' switches it turned off (:data:`SWITCHED`)."""
        off = [flag for flag in SWITCHED if config.get(flag) is False]
        if not off:
            return self
        flags = ", ".join("--no-" + flag.replace("_", "-") for flag in off)
        return Source(f"{self.label} ({flags})", self.records - {SWITCHED[flag] for flag in off})


TRACED = Source("a traced run", frozenset(EVIDENCE))
#: the tracers' switches (``Config`` fields, ``callid run --no-trace-*``) and the evidence each one off
#: leaves out of the log
SWITCHED = {"trace_hints": "hints", "trace_mpi": "barriers"}
#: the origin of the calls a replay adds of its own
REPLAY_ORIGIN = "replay"
_ACCESSES = frozenset({"accesses"})
#: each ``origin`` a call can have: its source (None and 'posix': traced as it ran)
ORIGINS: dict[str | None, Source] = {
    None: TRACED,
    "posix": TRACED,
    "DXT_MPIIO": Source("a Darshan log's DXT_MPIIO segments", _ACCESSES),
    "DXT_POSIX": Source("a Darshan log's DXT_POSIX segments", _ACCESSES),
    "callid": Source("a traced run's client log (its data accesses)", _ACCESSES | {"functions"}),
}


#: the Darshan counter module of the calls of each DXT origin (the layer whose counters count them)
DXT_LAYERS = {"DXT_MPIIO": "MPI-IO", "DXT_POSIX": "POSIX"}


def source_of_origins(origins: list[str | None]) -> Source:
    """The source of calls of these ``origins`` (every distinct origin of a run's calls): what all of
    them record.  A run of no calls is a traced one (there is nothing to decide); calls the replay added
    record nothing; an origin not known here records the accesses only."""
    if not origins:
        return TRACED
    sources = {ORIGINS.get(o) or Source(f"calls of origin {o}", _ACCESSES) for o in origins
               if o != REPLAY_ORIGIN}
    if sources <= {TRACED}:
        return TRACED if sources else Source("a replay's own calls", frozenset())
    replayed = sorted((s for s in sources if s != TRACED), key=lambda s: s.label)
    records = frozenset.intersection(*(s.records for s in sources))
    return Source("a replay of " + " and ".join(s.label for s in replayed), records)
