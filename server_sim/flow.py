"""Flows: move an I/O request's data between BMI and Trove in buffers.

The server's part of a request is a stream of physical segments; the stream is
cut into buffers of the flow buffer size (``distribution.flow_buffers``).  Each
buffer is one BMI message and one Trove list operation, done by the connection's
own thread straight from (into) one reusable scratch area: zero copies in Python,
and no thread hand-off per buffer (under the GIL a hand-off costs more than the
overlap it buys: profile in bench/README.md).  Several buffers are in flight, in
the kernel's socket buffers: the client sends every buffer of a write without
waiting, and a read's buffers leave in batches (several messages, one system call).
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass

from server_sim import bmi
from server_sim.distribution import flow_buffers
from server_sim.events import ServerEvents, Who, now
from server_sim.trove import Trove

log = logging.getLogger("server_sim.flow")
#: Bytes of a read flow's buffers that leave together, in one system call.
READ_BATCH = 1 << 20
_scratch = threading.local()


@dataclass
class FlowContext:
    """What a flow needs from its server."""

    trove: Trove
    events: ServerEvents
    buffer_size: int


@dataclass
class FlowSpec:
    """One request's flow: the datafile, its physical segments and who asked."""

    handle: int
    segments: tuple[tuple[int, int], ...]
    who: Who  # the request's event columns (ServerEvents.who)
    parent: int  # the request event
    hints_for: Callable[[list], dict] | None = None  # per-operation attribution (aggregated requests)


def _buffer(size: int) -> memoryview:
    """This thread's flow buffer (allocated once: a fresh one would page-fault on every flow)."""
    buf = getattr(_scratch, "buf", None)
    if buf is None or len(buf) < size:
        buf = _scratch.buf = bytearray(size)
    return memoryview(buf)


def _trove_op(ctx: FlowContext, spec: FlowSpec, flow_id: int, op: str,
              fn: Callable[[int, list, memoryview], int], pieces: list, view: memoryview) -> int:
    """Run one Trove list operation and log it."""
    events = ctx.events
    event_id = events.new_id()
    t0 = now()
    n = fn(spec.handle, pieces, view)
    who = events.who(spec.hints_for(pieces)) if spec.hints_for else spec.who
    events.record(event_id, "trove", op, who, flow_id, spec.handle, pieces[0][0], view.nbytes, t0, now())
    return n


def write_flow(ctx: FlowContext, sock: socket.socket, tag: int, spec: FlowSpec) -> int:
    """Receive the stream's buffers from ``sock`` and write each with one Trove operation."""
    flow_id = ctx.events.new_id()
    t0 = now()
    buf = _buffer(ctx.buffer_size)
    total = 0
    failure: OSError | None = None
    try:
        for pieces, nbytes in flow_buffers(spec.segments, ctx.buffer_size):
            view = buf[:nbytes]
            bmi.recv_expected_into(sock, tag, view)
            if failure is None:  # after a Trove error, keep draining the client's buffers
                try:
                    total += _trove_op(ctx, spec, flow_id, "trove_write", ctx.trove.write_list, pieces, view)
                except OSError as exc:
                    failure = exc
        if failure is not None:
            raise failure
    finally:
        ctx.events.record(flow_id, "flow", "flow_write", spec.who, spec.parent, spec.handle,
                          spec.segments[0][0] if spec.segments else 0, total, t0, now())
    return total


def read_flow(ctx: FlowContext, sock: socket.socket, tag: int, spec: FlowSpec,
              ahead: list[memoryview] | None = None) -> int:
    """Read the stream's buffers with Trove and send them to ``sock`` in stream order.

    Buffers leave in batches of up to ``READ_BATCH`` bytes, one system call each;
    ``ahead`` (the request's acknowledgement) leaves with the first batch, so after a
    Trove error before that it is never sent."""
    flow_id = ctx.events.new_id()
    t0 = now()
    per_batch = max(1, READ_BATCH // ctx.buffer_size)
    buf = _buffer(per_batch * ctx.buffer_size)
    out = ahead or []
    total = pos = 0
    try:
        buffers = flow_buffers(spec.segments, ctx.buffer_size)
        for i, (pieces, nbytes) in enumerate(buffers, 1):
            view = buf[pos:pos + nbytes]
            _trove_op(ctx, spec, flow_id, "trove_read", ctx.trove.read_list, pieces, view)
            out += bmi.frame(bmi.MODE_EXPECTED, tag, view)
            pos += nbytes
            total += nbytes
            if i % per_batch == 0 or i == len(buffers):
                bmi.send_buffers(sock, out)  # copied into the socket: the scratch is free again
                out, pos = [], 0
        if out:  # (the acknowledgement of an empty stream)
            bmi.send_buffers(sock, out)
    finally:
        ctx.events.record(flow_id, "flow", "flow_read", spec.who, spec.parent, spec.handle,
                          spec.segments[0][0] if spec.segments else 0, total, t0, now())
    return total
