"""Flows: move an I/O request's data between BMI and Trove in buffers.

The server's part of a request is a stream of physical segments; the stream is
cut into buffers of the flow buffer size (``distribution.stream_buffers``: one at a
time, so a flow's memory does not grow with its length).  Each
buffer is one BMI message and one Trove list operation, done by the connection's
own thread straight from (into) one scratch area, reused from flow to flow (the
server keeps a few between flows, not one per connection): zero copies in Python,
and no thread hand-off per buffer (under the GIL a hand-off costs more than the
overlap it buys: profile in bench/README.md).  Several buffers are in flight, in
the kernel's socket buffers, and move in batches of up to ``bmi.FLOW_BATCH`` bytes: the client
sends a write's buffers without waiting, a batch at a time, the server receives a batch
in one scatter receive (``bmi.recv_messages_into``) and then writes each buffer; a read's
buffers are read one by one and leave a batch at a time (several messages, one system call).
On a payload-free file system no buffer travels: each buffer is one Trove operation on its size.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from server_sim import bmi
from server_sim.context import RequestContext
from server_sim.distribution import buffer_count, stream_buffers
from server_sim.events import now

log = logging.getLogger("server_sim.flow")
#: Scratch areas of each size kept while no flow uses them (a fresh one would page-fault on every
#: flow; one per connection would stay with idle connections).
IDLE_SCRATCH = 8
_idle: dict[int, list[bytearray]] = {}
Segments = tuple[tuple[int, int], ...]


def _take(size: int) -> bytearray:
    """A scratch area of ``size`` bytes for one flow (give it back with :func:`_give`)."""
    try:
        return _idle.setdefault(size, []).pop()  # (list operations are atomic: no lock)
    except IndexError:
        return bytearray(size)


def _give(buf: bytearray) -> None:
    idle = _idle[len(buf)]
    if len(idle) < IDLE_SCRATCH:
        idle.append(buf)


def _trove_op(ctx: RequestContext, handle: int, flow_id: int, op: str,
              fn: Callable[[int, list, memoryview | None], int], k: int, pieces: list, size: int,
              view: memoryview | None = None) -> int:
    """Run the Trove list operation of buffer ``k`` (``size`` bytes, in ``view``; None: sizes only)
    and record it, attributed and placed in the file."""
    event_id = ctx.new_id()
    t0 = now()
    n = fn(handle, pieces, view)
    t1 = now()
    dist, dfile = ctx.layout
    ctx.record(event_id=event_id, layer="trove", op=op, parent=flow_id, handle=handle, offset=pieces[0][0],
               size=size, t_start=t0, t_end=t1, share=ctx.attribution.share(k, size),
               file_range=dist.logical_extent(dfile, pieces))
    return n


def _sizes_only(ctx: RequestContext, handle: int, segments: Segments, op: str,
                fn: Callable[[int, list, memoryview | None], int], ahead: list[memoryview]) -> int:
    """The flow of a payload-free file system (``Trove.STORES_DATA`` false): no buffer travels, each
    buffer's Trove operation runs on its size alone and is recorded as with data, then ``ahead``
    (a read's acknowledgement) leaves; the bytes of the stream.  The same events as a flow with data."""
    flow_id = ctx.new_id()
    t0 = now()
    total = 0
    try:
        ctx.attribution.expect(buffer_count(ctx.nbytes, ctx.state.flow_buffer))
        for k, (pieces, nbytes) in enumerate(stream_buffers(segments, ctx.state.flow_buffer)):
            _trove_op(ctx, handle, flow_id, f"trove_{op}", fn, k, pieces, nbytes)
            total += nbytes
        if ahead:
            ctx.send_buffers(ahead)
    finally:
        ctx.record(event_id=flow_id, layer="flow", op=f"flow_{op}", parent=ctx.event_id, handle=handle,
                   offset=segments[0][0] if segments else 0, size=total, t_start=t0, t_end=now(),
                   share=ctx.request_share())
    return total


def write_flow(ctx: RequestContext, handle: int, segments: Segments) -> int:
    """Receive the stream's buffers from the request's connection, up to ``bmi.FLOW_BATCH`` bytes
    of them in one scatter receive, and write each with one Trove operation (attributed by the
    request's ``ctx.attribution``)."""
    state, sock, tag = ctx.state, ctx.sock, ctx.tag
    if not state.trove.STORES_DATA:  # (payload NONE: the client sends no buffer)
        return _sizes_only(ctx, handle, segments, "write", state.trove.write_list, [])
    flow_id = ctx.new_id()
    t0 = now()
    count = buffer_count(ctx.nbytes, state.flow_buffer)
    per_batch = max(1, bmi.FLOW_BATCH // state.flow_buffer)
    scratch = _take(per_batch * state.flow_buffer)
    buf = memoryview(scratch)
    total = pos = 0
    batch: list[tuple[int, list, memoryview]] = []
    failure: OSError | None = None
    try:
        ctx.attribution.expect(count)
        for k, (pieces, nbytes) in enumerate(stream_buffers(segments, state.flow_buffer)):
            batch.append((k, pieces, buf[pos:pos + nbytes]))
            pos += nbytes
            if len(batch) < per_batch and k + 1 < count:
                continue
            bmi.recv_messages_into(sock, tag, [[view] for _, _, view in batch])
            ctx.received(pos)
            for i, buf_pieces, view in batch:
                if failure is None:  # after a Trove error, keep draining the client's buffers
                    try:
                        total += _trove_op(ctx, handle, flow_id, "trove_write", state.trove.write_list, i,
                                           buf_pieces, view.nbytes, view)
                    except OSError as exc:
                        failure = exc
            batch, pos = [], 0
        if failure is not None:
            raise failure
    finally:
        _give(scratch)
        ctx.record(event_id=flow_id, layer="flow", op="flow_write", parent=ctx.event_id, handle=handle,
                   offset=segments[0][0] if segments else 0, size=total, t_start=t0, t_end=now(),
                   share=ctx.request_share())
    return total


def read_flow(ctx: RequestContext, handle: int, segments: Segments, ahead: list[memoryview]) -> int:
    """Read the stream's buffers with Trove and send them on the request's connection in
    stream order (each Trove operation attributed by the request's ``ctx.attribution``).

    Buffers leave in batches of up to ``bmi.FLOW_BATCH`` bytes, one system call each;
    ``ahead`` (the request's acknowledgement) leaves with the first batch, so after a
    Trove error before that it is never sent."""
    state, tag = ctx.state, ctx.tag
    if not state.trove.STORES_DATA:  # (payload NONE: the acknowledgement alone leaves)
        return _sizes_only(ctx, handle, segments, "read", state.trove.read_list, ahead)
    flow_id = ctx.new_id()
    t0 = now()
    count = buffer_count(ctx.nbytes, state.flow_buffer)
    per_batch = max(1, bmi.FLOW_BATCH // state.flow_buffer)
    scratch = _take(per_batch * state.flow_buffer)
    buf = memoryview(scratch)
    out = ahead
    total = pos = 0
    try:
        ctx.attribution.expect(count)
        for i, (pieces, nbytes) in enumerate(stream_buffers(segments, state.flow_buffer), 1):
            view = buf[pos:pos + nbytes]
            _trove_op(ctx, handle, flow_id, "trove_read", state.trove.read_list, i - 1, pieces, nbytes, view)
            out += bmi.frame(bmi.MODE_EXPECTED, tag, view)
            pos += nbytes
            total += nbytes
            if i % per_batch == 0 or i == count:
                ctx.send_buffers(out)  # copied into the socket: the scratch is free again
                out, pos = [], 0
        if out:  # (the acknowledgement of an empty stream)
            ctx.send_buffers(out)
    finally:
        _give(scratch)
        ctx.record(event_id=flow_id, layer="flow", op="flow_read", parent=ctx.event_id, handle=handle,
                   offset=segments[0][0] if segments else 0, size=total, t_start=t0, t_end=now(),
                   share=ctx.request_share())
    return total
