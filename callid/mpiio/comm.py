"""Traced communicators: ``MPI.COMM_WORLD`` and the communicators made from it log their collective
calls (``MPI_Barrier``, ``MPI_Bcast``, ...) as calls without I/O, for the consistency checks of
``callid check`` (which synchronisation separates two accesses).

A communicator is known by its group (:func:`ident`): the size and a hash of its
``MPI_COMM_WORLD`` ranks, equal on all its ranks, logged with every collective call on it and on
the files opened on it.  Collectives the file system makes internally use :func:`untraced`.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable
from typing import Any

from mpi4py import MPI

from callid_core import clock

__all__ = ["GROUP_FREE", "TracedComm", "group_ident", "ident", "install", "uninstall", "untraced"]

#: (function, comm size, comm id, t_start) -> None: logs one collective call that ends now
CallHook = Callable[[str, int, int, int], None]
_hook: CallHook | None = None
_world: MPI.Intracomm | None = None

#: the collective operations of an intracommunicator that are traced (both the buffer and the
#: pickle flavours); MPI_ + the name capitalised is the function logged
COLLECTIVES = ("Barrier", "barrier", "Bcast", "bcast", "Gather", "gather", "Gatherv", "Scatter", "scatter",
               "Scatterv", "Allgather", "allgather", "Allgatherv", "Alltoall", "alltoall", "Alltoallv",
               "Reduce", "reduce", "Allreduce", "allreduce", "Reduce_scatter", "Reduce_scatter_block",
               "Scan", "scan", "Exscan", "exscan")
#: the one call without I/O logged that is not collective: the free of a group MPI_File_get_group gave
GROUP_FREE = "MPI_Group_free"
#: the calls that make communicators (their results are traced too)
CONSTRUCTORS = ("Dup", "Split", "Split_type", "Create", "Create_group")


def ident(comm: MPI.Comm) -> tuple[int, int]:
    """``(size, id)`` of a communicator's group: the id hashes its ranks in ``MPI_COMM_WORLD``."""
    group = comm.Get_group()
    try:
        return group_ident(group)
    finally:
        group.Free()


def group_ident(group: MPI.Group) -> tuple[int, int]:
    """``(size, id)`` of a group: the id hashes its ranks in ``MPI_COMM_WORLD``."""
    world = MPI.COMM_WORLD.Get_group()
    try:
        ranks = MPI.Group.Translate_ranks(group, list(range(group.Get_size())), world)
    finally:
        world.Free()
    digest = hashlib.blake2b(array("q", ranks).tobytes(), digest_size=8).digest()
    return len(ranks), int.from_bytes(digest, "little", signed=True)



def untraced(comm: MPI.Intracomm) -> MPI.Intracomm:
    """The same communicator, its calls not traced (for collectives callid itself makes)."""
    return MPI.Intracomm(comm) if isinstance(comm, TracedComm) else comm


class TracedComm(MPI.Intracomm):
    """An intracommunicator whose collective calls are logged (see the module's doc)."""

    _callid_ident: tuple[int, int] = (0, 0)

    def __new__(cls, comm: MPI.Intracomm) -> TracedComm:
        self = super().__new__(cls, comm)
        self._callid_ident = ident(comm)
        return self


def _collective(name: str) -> Callable[..., Any]:
    func = "MPI_" + name[0].upper() + name[1:]
    base = getattr(MPI.Intracomm, name)

    def method(self: TracedComm, *args: Any, **kwargs: Any) -> Any:
        hook = _hook
        if hook is None:
            return base(self, *args, **kwargs)
        t0 = clock.now()
        try:
            return base(self, *args, **kwargs)
        finally:
            hook(func, *self._callid_ident, t0)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"{func} (traced)."
    return method


def _constructor(name: str) -> Callable[..., Any]:
    base = getattr(MPI.Intracomm, name)

    def method(self: TracedComm, *args: Any, **kwargs: Any) -> Any:
        made = base(self, *args, **kwargs)
        return TracedComm(made) if isinstance(made, MPI.Intracomm) and made != MPI.COMM_NULL else made

    method.__name__ = method.__qualname__ = name
    return method


for _name in COLLECTIVES:
    if hasattr(MPI.Intracomm, _name):
        setattr(TracedComm, _name, _collective(_name))
for _name in CONSTRUCTORS:
    if hasattr(MPI.Intracomm, _name):
        setattr(TracedComm, _name, _constructor(_name))


def install(hook: CallHook) -> None:
    """Trace ``MPI.COMM_WORLD``'s collectives (and those of communicators made from it) into ``hook``."""
    global _hook, _world
    _hook = hook
    if _world is None:
        _world = MPI.COMM_WORLD
        MPI.COMM_WORLD = TracedComm(_world)


def uninstall() -> None:
    global _hook, _world
    _hook = None
    if _world is not None:
        MPI.COMM_WORLD = _world
        _world = None
