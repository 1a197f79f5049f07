"""Flows: move an I/O request's data between BMI and Trove in buffers.

The server's part of a request is a stream of physical segments; the stream is
cut into buffers of the flow buffer size (``distribution.split_buffers``).  Each
buffer is one BMI message and one Trove list operation, done by the connection's
own thread straight from (into) one reusable buffer: zero copies in Python, and no
thread hand-off per buffer (under the GIL a hand-off costs more than the overlap it
buys: profile in bench/README.md).  Several buffers are still in flight, in the
kernel's socket buffers: the client sends every buffer of a write without waiting,
and a read's buffers leave while Trove reads the next one.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass

from server_sim import bmi
from server_sim.distribution import split_buffers
from server_sim.events import ServerEvents, now
from server_sim.trove import Trove

log = logging.getLogger("server_sim.flow")
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
    segments: list[tuple[int, int]]
    hints: dict
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
    event_id = ctx.events.new_id()
    t0 = now()
    n = fn(spec.handle, pieces, view)
    hints = spec.hints_for(pieces) if spec.hints_for else spec.hints
    ctx.events.record(event_id, "trove", op, hints, flow_id, spec.handle,
                      pieces[0][0], view.nbytes, t0, now())
    return n


def write_flow(ctx: FlowContext, sock: socket.socket, tag: int, spec: FlowSpec) -> int:
    """Receive the stream's buffers from ``sock`` and write each with one Trove operation."""
    flow_id = ctx.events.new_id()
    t0 = now()
    buf = _buffer(ctx.buffer_size)
    total = 0
    failure: OSError | None = None
    try:
        for pieces in split_buffers(spec.segments, ctx.buffer_size):
            view = buf[: sum(n for _, n in pieces)]
            bmi.recv_expected_into(sock, tag, view)
            if failure is None:  # after a Trove error, keep draining the client's buffers
                try:
                    total += _trove_op(ctx, spec, flow_id, "trove_write", ctx.trove.write_list, pieces, view)
                except OSError as exc:
                    failure = exc
        if failure is not None:
            raise failure
    finally:
        ctx.events.record(flow_id, "flow", "flow_write", spec.hints, spec.parent, spec.handle,
                          spec.segments[0][0] if spec.segments else 0, total, t0, now())
    return total


def read_flow(ctx: FlowContext, sock: socket.socket, tag: int, spec: FlowSpec,
              ahead: list[memoryview] | None = None) -> int:
    """Read the stream's buffers with Trove and send each to ``sock`` in stream order.

    ``ahead`` (the request's acknowledgement) leaves in the same system call as the
    first buffer; after a Trove error before that, it is never sent."""
    flow_id = ctx.events.new_id()
    t0 = now()
    buf = _buffer(ctx.buffer_size)
    total = 0
    try:
        for pieces in split_buffers(spec.segments, ctx.buffer_size):
            view = buf[: sum(n for _, n in pieces)]
            _trove_op(ctx, spec, flow_id, "trove_read", ctx.trove.read_list, pieces, view)
            # copied into the socket: the buffer is free again when this returns
            bmi.send_buffers(sock, (ahead or []) + bmi.frame(bmi.MODE_EXPECTED, tag, view))
            ahead = None
            total += view.nbytes
        if ahead:
            bmi.send_buffers(sock, ahead)
    finally:
        ctx.events.record(flow_id, "flow", "flow_read", spec.hints, spec.parent, spec.handle,
                          spec.segments[0][0] if spec.segments else 0, total, t0, now())
    return total
