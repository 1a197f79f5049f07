"""What a request's state machine works with: the server's shared state and the request's context."""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from server_sim import bmi
from server_sim import protocol as P
from server_sim.attribution import Attribution, Share
from server_sim.devices import Link
from server_sim.distribution import SimpleStripe
from server_sim.events import ServerEvents, now
from server_sim.trove import MetaStore, Trove

T = TypeVar("T")


@dataclass(frozen=True)
class ServerState:
    """What every request of one server shares: its name, its layers and the file system's layout."""

    name: str
    trove: Trove
    meta: MetaStore | None  # (None: not a metadata server)
    events: ServerEvents
    flow_buffer: int
    io_servers: tuple[str, ...]
    default_strip_size: int
    max_flow: int  # most bytes one I/O request may move on one datafile
    payload: int  # what its I/O requests move (protocol.PayloadCode: the bytes, or sizes only)
    link: Link | None = None  # its modelled network link (None: the socket as it is)


def send_reply(sock: socket.socket, tag: int, msg: P.Response, t_recv: int) -> None:
    """Send a reply to the request with ``tag`` that arrived at ``t_recv``."""
    bmi.send_buffers(sock, reply_buffers(tag, msg, t_recv))


def reply_buffers(tag: int, msg: P.Response, t_recv: int) -> list[memoryview]:
    """A reply's framed buffers, stamped with the request's receive time and the time now."""
    msg.t_recv, msg.t_send = t_recv, now()
    return bmi.frame(bmi.MODE_EXPECTED, tag, P.encode(msg))


class RequestContext:
    """One request being served, made by the request loop when the request arrives.

    It holds the connection and tag, who asked (:class:`~server_sim.events.Who`, its
    CallIDs decoded once from its hints), the request's event id and the bytes it moves
    here (``nbytes``, set by its machine); an I/O request also its datafile's place in the file
    (``layout``: the distribution and the datafile's number) and the attribution of its disk
    operations (``attribution``), set by its machine.  The request's work reserves its event ids with
    ``new_id`` (before an event starts: its children name it as their parent) and records
    its events through it (:meth:`record`, :meth:`timed`); :meth:`finish` records the
    request's own event."""

    __slots__ = ("state", "sock", "tag", "t_recv", "op", "handle", "who", "event_id", "nbytes", "new_id",
                 "layout", "attribution")

    def __init__(self, state: ServerState, sock: socket.socket, tag: int, t_recv: int, req: P.Request,
                 op: str | None) -> None:
        """``op``: the name of the request's event (None: the request leaves no event)."""
        self.state = state
        self.sock = sock
        self.tag = tag
        self.t_recv = t_recv
        self.op = op
        self.handle: int = getattr(req, "handle", 0)
        self.who = state.events.who(req.hints)
        self.new_id: Callable[[], int] = state.events.new_id
        self.event_id = self.new_id()
        self.nbytes = 0
        self.layout: tuple[SimpleStripe, int] | None = None
        self.attribution: Attribution | None = None

    def record(self, *, event_id: int, layer: str, op: str, parent: int, handle: int, offset: int, size: int,
               t_start: int, t_end: int, share: Share | None = None,
               file_range: tuple[int, int] = (-1, -1)) -> None:
        """Record one finished event of this request (``share``: the CallIDs it serves and their
        bytes, see :class:`~server_sim.attribution.Share`; None: the defaults of
        :meth:`ServerEvents.record`; ``file_range``: a data operation's range in the file)."""
        self.state.events.record(event_id=event_id, layer=layer, op=op, who=self.who, parent=parent,
                                 handle=handle, offset=offset, size=size, t_start=t_start, t_end=t_end,
                                 share=share, file_range=file_range)

    def request_share(self) -> Share | None:
        """The bytes per CallID of an aggregated request's disk operations so far (None: the
        defaults of :meth:`ServerEvents.record`)."""
        a = self.attribution
        if a is None or len(self.who.callids) < 2:
            return None
        return Share(None, a.totals or [], a.own_totals or [], 0)

    def timed(self, layer: str, op: str, fn: Callable[[], T], handle: int = 0, offset: int = 0,
              size: int = 0) -> T:
        """Run one disk operation and record it as an event of ``layer`` under the request's."""
        event_id = self.new_id()
        t0 = now()
        result = fn()
        self.record(event_id=event_id, layer=layer, op=op, parent=self.event_id, handle=handle, offset=offset,
                    size=size, t_start=t0, t_end=now())
        return result

    def frame(self, msg: P.Response) -> list[memoryview]:
        """A reply's framed buffers, to send later."""
        return reply_buffers(self.tag, msg, self.t_recv)

    def send(self, msg: P.Response) -> None:
        """Send a reply now."""
        self.send_buffers(self.frame(msg))

    def send_buffers(self, buffers: list[memoryview]) -> None:
        """Send framed buffers on the request's connection, once they have crossed the modelled link."""
        if self.state.link is not None:
            self.state.link.outbound(sum(b.nbytes for b in buffers))
        bmi.send_buffers(self.sock, buffers)

    def received(self, nbytes: int) -> None:
        """``nbytes`` of the request's buffers came in: return once they have crossed the modelled link."""
        if self.state.link is not None:
            self.state.link.inbound(nbytes)

    def finish(self) -> None:
        """Record the request's own event (layer ``req``), ending now."""
        if self.op is not None:
            self.state.events.record(event_id=self.event_id, layer="req", op=self.op, who=self.who, parent=-1,
                                     handle=self.handle, offset=0, size=self.nbytes, t_start=self.t_recv,
                                     t_end=now(), share=self.request_share())
