"""Traced communicators: ``MPI.COMM_WORLD`` and the communicators made from it log their calls without
I/O: the collectives (``MPI_Barrier``, ``MPI_Bcast``, ...), for the consistency checks of ``callid check``
(which synchronisation separates two accesses), and the point-to-point calls (``MPI_Send``, ``MPI_Recv``,
the non-blocking ones when issued, ...), as HDTrace's wrapper logs them: the other rank, the tag, the
data sent (a receive: received) and a rooted collective's root; and the communicators a rank makes
(``MPI_Comm_dup``, ``MPI_Comm_split``, ...) with their members, as HDTrace's communicator map has them (a
rank that makes none, MPI_COMM_NULL, logs nothing).

A communicator is known by its group (:func:`ident`): the size and a hash of its
``MPI_COMM_WORLD`` ranks, equal on all its ranks, logged with every collective call on it and on
the files opened on it.  The MPI calls callid's MPI-IO makes inside a traced call are not the program's:
its communicators are :func:`untraced`, or, when the run logs nested calls, :func:`nested` (their calls
go to the nested-call hook, HDTrace's nested calls).
"""

from __future__ import annotations

import hashlib
import inspect
from array import array
from collections.abc import Callable, Iterator
from typing import Any

from mpi4py import MPI

from callid.mpiio.datatypes import buffer_spec, type_name
from callid_core import clock

__all__ = ["GROUP_FREE", "Message", "NestedComm", "TracedComm", "group_ident", "ident", "install", "members",
           "nested", "uninstall", "untraced"]

#: (function, comm size, comm id, t_start, collective, details) -> None: logs one call that ends now;
#: details: what else it says (peer, tag, root, count, datatype, size), as columns of the client log
CallHook = Callable[[str, int, int, int, bool, dict], None]
_hook: CallHook | None = None
_nested_hook: CallHook | None = None  # (the calls on NestedComm communicators)
_world: MPI.Intracomm | None = None
_rids: Iterator[int] = iter(())
_types: Callable[..., list[int]] = lambda *dtypes: []  # noqa: E731
_BaseRequest = MPI.Request

#: the collective operations of an intracommunicator that are traced (both the buffer and the
#: pickle flavours); MPI_ + the name capitalised is the function logged
COLLECTIVES = ("Barrier", "barrier", "Bcast", "bcast", "Gather", "gather", "Gatherv", "Scatter", "scatter",
               "Scatterv", "Allgather", "allgather", "Allgatherv", "Alltoall", "alltoall", "Alltoallv",
               "Reduce", "reduce", "Allreduce", "allreduce", "Reduce_scatter", "Reduce_scatter_block",
               "Scan", "scan", "Exscan", "exscan")
#: the one call without I/O logged that is not collective: the free of a group MPI_File_get_group gave
GROUP_FREE = "MPI_Group_free"
#: the point-to-point calls traced (the buffer and pickle flavours; a pickled object is not described):
#: the parameters that say the peer, the tag and the status (a receive's: who sent what; a Sendrecv: its send)
_SENDS = ("Send", "Ssend", "Bsend", "Rsend", "Isend", "Issend", "Ibsend", "Irsend", "send", "ssend", "bsend",
          "isend", "issend")
POINT_TO_POINT: dict[str, tuple[str, str, str | None]] = {
    **{name: ("dest", "tag", None) for name in _SENDS}, "Sendrecv": ("dest", "sendtag", None),
    "Recv": ("source", "tag", "status"), "recv": ("source", "tag", "status"),
    "Irecv": ("source", "tag", None), "Probe": ("source", "tag", "status"),
}
#: the non-blocking point-to-point calls: their requests are traced (:class:`Message`)
NONBLOCKING = ("Isend", "Issend", "Ibsend", "Irsend", "Irecv", "isend", "issend")
#: the calls that make communicators (their results are traced too)
CONSTRUCTORS = ("Dup", "Split", "Split_type", "Create", "Create_group")


def ident(comm: MPI.Comm) -> tuple[int, int]:
    """``(size, id)`` of a communicator's group: the id hashes its ranks in ``MPI_COMM_WORLD``."""
    return ranks_ident(members(comm))


def group_ident(group: MPI.Group) -> tuple[int, int]:
    """``(size, id)`` of a group (as :func:`ident`)."""
    return ranks_ident(_world_ranks(group))


def ranks_ident(ranks: list[int]) -> tuple[int, int]:
    """``(size, id)`` of the group of these ``MPI_COMM_WORLD`` ranks, in its order."""
    digest = hashlib.blake2b(array("q", ranks).tobytes(), digest_size=8).digest()
    return len(ranks), int.from_bytes(digest, "little", signed=True)


def members(comm: MPI.Comm) -> list[int]:
    """The ``MPI_COMM_WORLD`` ranks of a communicator's members, in its rank order."""
    group = comm.Get_group()
    try:
        return _world_ranks(group)
    finally:
        group.Free()


def _world_ranks(group: MPI.Group) -> list[int]:
    world = MPI.COMM_WORLD.Get_group()
    try:
        return MPI.Group.Translate_ranks(group, list(range(group.Get_size())), world)
    finally:
        world.Free()


def untraced(comm: MPI.Intracomm) -> MPI.Intracomm:
    """The same communicator, its calls not traced (for collectives callid itself makes)."""
    return MPI.Intracomm(comm) if isinstance(comm, TracedComm) else comm


def nested(comm: MPI.Intracomm) -> NestedComm:
    """The same communicator, its calls logged as nested calls (the calls callid's MPI-IO makes)."""
    return NestedComm(untraced(comm))


class TracedComm(MPI.Intracomm):
    """An intracommunicator whose collective calls are logged (see the module's doc)."""

    _callid_ident: tuple[int, int] = (0, 0)
    _callid_members: list[int] = []
    _callid_nested = False  # (its calls go to the nested-call hook)

    def __new__(cls, comm: MPI.Intracomm) -> TracedComm:
        self = super().__new__(cls, comm)
        self._callid_members = members(comm)
        self._callid_ident = ranks_ident(self._callid_members)
        return self


class NestedComm(TracedComm):
    """A communicator of callid's MPI-IO whose calls are logged as nested calls (:func:`nested`)."""

    _callid_nested = True


def _hook_of(comm: TracedComm) -> CallHook | None:
    """Where the calls on ``comm`` are logged (None: nowhere)."""
    return _nested_hook if comm._callid_nested else _hook


def _data(buf: Any, ids: bool = True) -> dict:
    """The count, datatype and bytes of a buffer argument (none: a pickled object, or no buffer); ``ids``:
    with the ids of its datatype (the program's calls; a nested call's types are the MPI-IO's)."""
    if buf is None or isinstance(buf, MPI.BottomType) or buf is MPI.IN_PLACE:
        return {}
    try:
        _view, count, dtype = buffer_spec(buf)
    except (TypeError, ValueError):
        return {}
    return {"count": count, "datatype": type_name(dtype), "size": count * dtype.Get_size(),
            "type_ids": _types(dtype) if ids else []}


def _collective(name: str) -> Callable[..., Any]:
    func = "MPI_" + name[0].upper() + name[1:]
    base = getattr(MPI.Intracomm, name)
    signature = inspect.signature(base).parameters
    params = tuple(signature)[1:]  # (after self)
    described = name[0].isupper() and params[:1] in (("buf",), ("sendbuf",))  # (a buffer, not an object)

    def method(self: TracedComm, *args: Any, **kwargs: Any) -> Any:
        hook = _hook_of(self)
        if hook is None:
            return base(self, *args, **kwargs)
        t0 = clock.now()
        try:
            return base(self, *args, **kwargs)
        finally:
            bound = dict(zip(params, args)) | kwargs
            details = _data(bound.get(params[0]), not self._callid_nested) if described else {}
            if "root" in signature:
                details["root"] = bound.get("root", signature["root"].default)
            hook(func, *self._callid_ident, t0, True, details)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"{func} (traced)."
    return method


def _point_to_point(name: str) -> Callable[..., Any]:
    func = "MPI_" + name[0].upper() + name[1:]
    base = getattr(MPI.Comm, name)
    peer, tag, status_param = POINT_TO_POINT[name]
    params = tuple(inspect.signature(base).parameters)[1:]  # (after self)
    receives = peer == "source"
    described = name[0].isupper() and params[0] in ("buf", "sendbuf")  # (a buffer, not a pickled object)

    def method(self: TracedComm, *args: Any, **kwargs: Any) -> Any:
        hook = _hook_of(self)
        if hook is None:
            return base(self, *args, **kwargs)
        bound = dict(zip(params, args)) | kwargs
        if status_param and bound.get(status_param) is None:  # (our own: it says who sent what)
            bound[status_param] = MPI.Status()
        t0 = clock.now()
        result = base(self, **bound)
        status = bound.get(status_param) if status_param else None
        details = {"peer": status.Get_source() if status else bound.get(peer, MPI.ANY_SOURCE),
                   "tag": status.Get_tag() if status else bound.get(tag, MPI.ANY_TAG if receives else 0)}
        for key, anything in (("peer", MPI.ANY_SOURCE), ("tag", MPI.ANY_TAG)):
            if details[key] == anything:  # (a non-blocking receive posted for any source or tag)
                details[key] = None
        data = _data(bound.get(params[0]), not self._callid_nested) if described else {}
        if data and status is not None:  # (what it received)
            data = _received(data, status)
        if name in NONBLOCKING and isinstance(result, _BaseRequest) and not self._callid_nested:
            details["rid"] = next(_rids)
            result = Message(result)
            result._callid_done = _completion(self._callid_ident, details | data, receives)
        hook(func, *self._callid_ident, t0, False, details | data)
        return result

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"{func} (traced)."
    return method


def _received(data: dict, status: MPI.Status) -> dict:
    """A receive's count and bytes as its status says (``data``: as posted; kept when the bytes are not
    whole elements, as MPI_Get_count says MPI_UNDEFINED)."""
    got = status.Get_count(MPI.BYTE)
    size = data["size"] // data["count"] if data.get("count") else 0
    whole = got != MPI.UNDEFINED and size and got % size == 0
    return data | {"count": got // size, "size": got} if whole else data


#: logs a request's completion: (the completing call, when it began, its status of the request)
Done = Callable[[str, int, "MPI.Status | None"], None]


def _completion(comm: tuple[int, int], issued: dict, receives: bool) -> Done:
    """What logs the completion of a request issued with ``issued`` (its row's details) on ``comm``: an
    'mpi' row of the completing call, with the request's rid (a receive: the source, tag and count its
    status says)."""
    def done(func: str, t0: int, status: MPI.Status | None) -> None:
        if _hook is None:
            return
        row = dict(issued)
        if receives and status is not None:
            row |= {"peer": status.Get_source(), "tag": status.Get_tag()}
            row = _received(row, status) if "count" in row else row
        _hook(func, *comm, t0, False, row)
    return done


class Message(MPI.Request):
    """The request of a traced non-blocking point-to-point call: its completion is logged (kind 'mpi',
    the completing call, e.g. MPI_Wait, with the request's rid) when it completes through this object
    or through ``MPI.Request``'s functions of several requests (``Waitall``, ``Testany``, ...: while
    tracing, ``MPI.Request`` is this class)."""

    _callid_done: Done | None = None

    def _callid_complete(self, func: str, t0: int, status: MPI.Status | None) -> None:
        done, self._callid_done = self._callid_done, None
        if done is not None:
            done(func, t0, status)

    def Wait(self, status: MPI.Status | None = None) -> bool:
        t0, status = clock.now(), status if status is not None else MPI.Status()
        _BaseRequest.Wait(self, status)
        self._callid_complete("MPI_Wait", t0, status)
        return True

    def Test(self, status: MPI.Status | None = None) -> bool:
        t0, status = clock.now(), status if status is not None else MPI.Status()
        flag = _BaseRequest.Test(self, status)
        if flag:
            self._callid_complete("MPI_Test", t0, status)
        return flag

    def wait(self, status: MPI.Status | None = None) -> Any:
        t0, status = clock.now(), status if status is not None else MPI.Status()
        obj = _BaseRequest.wait(self, status)
        self._callid_complete("MPI_Wait", t0, status)
        return obj

    def test(self, status: MPI.Status | None = None) -> tuple[bool, Any]:
        t0, status = clock.now(), status if status is not None else MPI.Status()
        flag, obj = _BaseRequest.test(self, status)
        if flag:
            self._callid_complete("MPI_Test", t0, status)
        return flag, obj


#: the functions of several requests, and how their statuses map to the requests: one per request
#: ('all'), the one completed ('any'), one per completed request in the order of the indices ('some')
_SEVERAL = {"Waitall": "all", "Testall": "all", "waitall": "all", "testall": "all", "Waitany": "any",
            "Testany": "any", "Waitsome": "some", "Testsome": "some"}


def _several(name: str, statuses_of: str) -> classmethod:
    func = "MPI_" + name[0].upper() + name[1:]
    base = getattr(_BaseRequest, name)

    def method(cls: type, requests: Any, *args: Any, **kwargs: Any) -> Any:
        statuses = args[0] if args else kwargs.get("status" if statuses_of == "any" else "statuses")
        traced = [i for i, r in enumerate(requests) if isinstance(r, Message) and r._callid_done is not None]
        if not traced:
            return base(requests, statuses)
        t0 = clock.now()
        if statuses is None:
            statuses = MPI.Status() if statuses_of == "any" else [MPI.Status() for _ in requests]
        result = base(requests, statuses)
        if statuses_of == "all":
            status_of = dict(enumerate(statuses))
        elif statuses_of == "any":
            index = result[0] if isinstance(result, tuple) else result
            status_of = {index: statuses}
        else:
            status_of = {i: st for i, st in zip(result or [], statuses)}
        for i in traced:
            if requests[i] == MPI.REQUEST_NULL:  # (completed by this call)
                requests[i]._callid_complete(func, t0, status_of.get(i))
        return result

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"{func} (traced)."
    return classmethod(method)


for _name, _statuses in _SEVERAL.items():
    setattr(Message, _name, _several(_name, _statuses))


def _constructor(name: str) -> Callable[..., Any]:
    func = f"MPI_Comm_{name.lower()}"
    base = getattr(MPI.Intracomm, name)

    def method(self: TracedComm, *args: Any, **kwargs: Any) -> Any:
        t0 = clock.now()
        made = base(self, *args, **kwargs)
        if not isinstance(made, MPI.Intracomm) or made == MPI.COMM_NULL:
            return made
        traced = type(self)(made)
        hook = _hook_of(self)
        if hook is not None:  # (the communicator made: its id, size and members)
            hook(func, *traced._callid_ident, t0, True, {"members": traced._callid_members})
        return traced

    method.__name__ = method.__qualname__ = name
    return method


for _name in COLLECTIVES:
    if hasattr(MPI.Intracomm, _name):
        setattr(TracedComm, _name, _collective(_name))
for _name in POINT_TO_POINT:
    if hasattr(MPI.Comm, _name):
        setattr(TracedComm, _name, _point_to_point(_name))
for _name in CONSTRUCTORS:
    if hasattr(MPI.Intracomm, _name):
        setattr(TracedComm, _name, _constructor(_name))


def install(hook: CallHook, rids: Iterator[int], types: Callable[..., list[int]],
            nested_hook: CallHook | None = None) -> None:
    """Trace ``MPI.COMM_WORLD``'s collectives (and those of communicators made from it) into ``hook``;
    ``rids``: the request ids of the rank; ``types``: the ids of datatypes (``TypeLog.ids``);
    ``nested_hook``: where the calls on :func:`nested` communicators go (None: nowhere)."""
    global _hook, _nested_hook, _world, _rids, _types
    _hook, _nested_hook, _rids, _types = hook, nested_hook, rids, types
    if _world is None:
        _world = MPI.COMM_WORLD
        MPI.COMM_WORLD = TracedComm(_world)
        MPI.Request = Message


def uninstall() -> None:
    global _hook, _nested_hook, _world
    _hook = _nested_hook = None
    if _world is not None:
        MPI.COMM_WORLD = _world
        MPI.Request = _BaseRequest
        _world = None
