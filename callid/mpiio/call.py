"""On whose behalf the client talks to the file system: the context of one MPI call."""

from __future__ import annotations

from dataclasses import dataclass

from callid.mpiio.record import Record

__all__ = ["CallContext"]


@dataclass(frozen=True, slots=True)
class CallContext:
    """The CallIDs every request of an operation carries and the MPI function its rpcs are logged under.

    ``owners`` (aggregated I/O, for several calls at once): ``(file offset, length, index into
    callids)`` ranges saying whose bytes are where; empty when the bytes are all of every call.
    ``known`` False: whose bytes are where is not known (the requests say nothing of it: the servers
    attribute them at request level).
    """

    callids: tuple[int, ...]
    func: str
    owners: tuple[tuple[int, int, int], ...] = ()
    known: bool = True

    @classmethod
    def of(cls, rec: Record) -> CallContext:
        """The context of the one call ``rec`` records."""
        return cls((rec.callid,), rec.func)
