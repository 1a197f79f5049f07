"""Flows: move an I/O request's data between BMI and Trove in buffers, several in flight.

The server's part of a request is a stream of physical segments; the stream is
cut into buffers of the flow buffer size (``distribution.split_buffers``).  Each
buffer is one BMI message and one Trove list operation.  Up to ``flow_buffers``
buffers are in flight: while Trove writes buffer i, BMI already receives i+1.
"""

from __future__ import annotations

import logging
import socket
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from server_sim import bmi
from server_sim.distribution import split_buffers
from server_sim.events import ServerEvents, now
from server_sim.trove import Trove

log = logging.getLogger("server_sim.flow")


@dataclass
class FlowContext:
    """What a flow needs from its server."""

    trove: Trove
    pool: ThreadPoolExecutor
    events: ServerEvents
    buffer_size: int
    buffers_in_flight: int


@dataclass
class FlowSpec:
    """One request's flow: the datafile, its physical segments and who asked."""

    handle: int
    segments: list[tuple[int, int]]
    hints: dict
    parent: int  # the request event
    hints_for: Callable[[list], dict] | None = None  # per-operation attribution (aggregated requests)


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
    plan = split_buffers(spec.segments, ctx.buffer_size)
    slots = [bytearray(ctx.buffer_size) for _ in range(min(ctx.buffers_in_flight, len(plan)))]
    inflight: deque[Future] = deque()
    total = 0
    failure: OSError | None = None
    try:
        for i, pieces in enumerate(plan):
            if len(inflight) == len(slots):
                total, failure = _settle(inflight.popleft(), total, failure)
            view = memoryview(slots[i % len(slots)])[: sum(n for _, n in pieces)]
            bmi.recv_expected_into(sock, tag, view)
            if failure is None:  # after a Trove error, keep draining the client's buffers
                inflight.append(ctx.pool.submit(
                    _trove_op, ctx, spec, flow_id, "trove_write", ctx.trove.write_list, pieces, view))
        while inflight:
            total, failure = _settle(inflight.popleft(), total, failure)
        if failure is not None:
            raise failure
    finally:
        for fut in inflight:
            fut.cancel()
        ctx.events.record(flow_id, "flow", "flow_write", spec.hints, spec.parent, spec.handle,
                          spec.segments[0][0] if spec.segments else 0, total, t0, now())
    return total


def _settle(fut: Future, total: int, failure: OSError | None) -> tuple[int, OSError | None]:
    """Wait for one Trove write; keep the first error instead of raising it mid-flow."""
    try:
        return total + fut.result(), failure
    except OSError as exc:
        return total, failure or exc


def read_flow(ctx: FlowContext, sock: socket.socket, tag: int, spec: FlowSpec) -> int:
    """Read the stream's buffers with Trove and send each to ``sock`` in stream order."""
    flow_id = ctx.events.new_id()
    t0 = now()
    plan = split_buffers(spec.segments, ctx.buffer_size)
    slots = [bytearray(ctx.buffer_size) for _ in range(min(ctx.buffers_in_flight, len(plan)))]
    inflight: deque[tuple[Future, memoryview]] = deque()
    total = 0

    def submit(i: int) -> None:
        pieces = plan[i]
        view = memoryview(slots[i % len(slots)])[: sum(n for _, n in pieces)]
        inflight.append((ctx.pool.submit(
            _trove_op, ctx, spec, flow_id, "trove_read", ctx.trove.read_list, pieces, view), view))

    try:
        nxt = 0
        while nxt < min(len(slots), len(plan)):
            submit(nxt)
            nxt += 1
        while inflight:
            fut, view = inflight.popleft()
            fut.result()
            bmi.send(sock, bmi.MODE_EXPECTED, tag, view)
            total += view.nbytes
            if nxt < len(plan):
                submit(nxt)
                nxt += 1
    finally:
        for fut, _ in inflight:
            fut.cancel()
        ctx.events.record(flow_id, "flow", "flow_read", spec.hints, spec.parent, spec.handle,
                          spec.segments[0][0] if spec.segments else 0, total, t0, now())
    return total
