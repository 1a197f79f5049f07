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
import threading
from collections.abc import Callable

from server_sim import bmi
from server_sim.context import RequestContext
from server_sim.distribution import flow_buffers
from server_sim.events import now

log = logging.getLogger("server_sim.flow")
#: Bytes of a read flow's buffers that leave together, in one system call.
READ_BATCH = 1 << 20
_scratch = threading.local()
Segments = tuple[tuple[int, int], ...]


def _buffer(size: int) -> memoryview:
    """This thread's flow buffer (allocated once: a fresh one would page-fault on every flow)."""
    buf = getattr(_scratch, "buf", None)
    if buf is None or len(buf) < size:
        buf = _scratch.buf = bytearray(size)
    return memoryview(buf)


def _trove_op(ctx: RequestContext, handle: int, flow_id: int, op: str,
              fn: Callable[[int, list, memoryview], int], k: int, pieces: list, view: memoryview) -> int:
    """Run the Trove list operation of buffer ``k`` and record it, attributed and placed in the file."""
    event_id = ctx.new_id()
    t0 = now()
    n = fn(handle, pieces, view)
    t1 = now()
    callids, nbytes = ctx.attribution.share(k, view.nbytes)
    dist, dfile = ctx.layout
    ctx.record(event_id, "trove", op, flow_id, handle, pieces[0][0], view.nbytes, t0, t1, callids, nbytes,
               dist.logical_extent(dfile, pieces))
    return n


def write_flow(ctx: RequestContext, handle: int, segments: Segments) -> int:
    """Receive the stream's buffers from the request's connection and write each with one
    Trove operation (attributed by the request's ``ctx.attribution``)."""
    flow_id = ctx.new_id()
    t0 = now()
    state, sock, tag = ctx.state, ctx.sock, ctx.tag
    buf = _buffer(state.flow_buffer)
    total = 0
    failure: OSError | None = None
    try:
        buffers = flow_buffers(segments, state.flow_buffer)
        ctx.attribution.expect(len(buffers))
        for k, (pieces, nbytes) in enumerate(buffers):
            view = buf[:nbytes]
            bmi.recv_expected_into(sock, tag, view)
            if failure is None:  # after a Trove error, keep draining the client's buffers
                try:
                    total += _trove_op(ctx, handle, flow_id, "trove_write", state.trove.write_list, k, pieces,
                                       view)
                except OSError as exc:
                    failure = exc
        if failure is not None:
            raise failure
    finally:
        ctx.record(flow_id, "flow", "flow_write", ctx.event_id, handle, segments[0][0] if segments else 0,
                   total, t0, now(), None, ctx.request_bytes())
    return total


def read_flow(ctx: RequestContext, handle: int, segments: Segments, ahead: list[memoryview]) -> int:
    """Read the stream's buffers with Trove and send them on the request's connection in
    stream order (each Trove operation attributed by the request's ``ctx.attribution``).

    Buffers leave in batches of up to ``READ_BATCH`` bytes, one system call each;
    ``ahead`` (the request's acknowledgement) leaves with the first batch, so after a
    Trove error before that it is never sent."""
    flow_id = ctx.new_id()
    t0 = now()
    state, sock, tag = ctx.state, ctx.sock, ctx.tag
    per_batch = max(1, READ_BATCH // state.flow_buffer)
    buf = _buffer(per_batch * state.flow_buffer)
    out = ahead
    total = pos = 0
    try:
        buffers = flow_buffers(segments, state.flow_buffer)
        ctx.attribution.expect(len(buffers))
        for i, (pieces, nbytes) in enumerate(buffers, 1):
            view = buf[pos:pos + nbytes]
            _trove_op(ctx, handle, flow_id, "trove_read", state.trove.read_list, i - 1, pieces, view)
            out += bmi.frame(bmi.MODE_EXPECTED, tag, view)
            pos += nbytes
            total += nbytes
            if i % per_batch == 0 or i == len(buffers):
                bmi.send_buffers(sock, out)  # copied into the socket: the scratch is free again
                out, pos = [], 0
        if out:  # (the acknowledgement of an empty stream)
            bmi.send_buffers(sock, out)
    finally:
        ctx.record(flow_id, "flow", "flow_read", ctx.event_id, handle, segments[0][0] if segments else 0,
                   total, t0, now(), None, ctx.request_bytes())
    return total
