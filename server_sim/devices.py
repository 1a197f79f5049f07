"""A server's modelled devices (``callid_core.devices``): its disk, metadata store and network link as
queues with service times, and the faults planted in them.

The disk operations keep going to the real files; a :class:`Device` only holds each one back: an
operation arriving when all ``queue`` places are taken waits for the first to free (its wait is part of
the disk operation's time, as in a disk's queue), then takes ``factor`` times the longer of the model's
service time and its real one.  A :class:`Link` holds each message the same way, one direction at a
time: a request or flow buffer that came in is served when its modelled crossing ends, a reply or flow
buffer leaves when its crossing ends.  With no model and no fault, nothing is wrapped: the server is as
before.  :meth:`Device.schedule` is the arithmetic, tested on its own.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from callid_core.devices import NOMINAL_LINK, DeviceModel, Fault

__all__ = ["Device", "Link", "ModelledMeta", "ModelledTrove", "Pause", "link_of", "modelled"]


class Device:
    """``model.queue`` places, each serving one operation at a time for ``factor`` x its service time."""

    def __init__(self, model: DeviceModel, factor: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.model = model
        self.factor = factor
        self._clock = clock
        self._free = [0.0] * model.queue  # when each place is free again
        self._lock = threading.Lock()

    def schedule(self, arrive: float, nbytes: int) -> tuple[int, float, float]:
        """The place, start and (modelled) end of an operation of ``nbytes`` arriving at ``arrive``: the
        place free first, from when it is free, for ``factor`` x the model's service time."""
        with self._lock:
            place = min(range(len(self._free)), key=self._free.__getitem__)
            start = max(arrive, self._free[place])
            end = start + self.factor * self.model.service(nbytes)
            self._free[place] = end
        return place, start, end

    def finished(self, place: int, start: float, end: float, real: float) -> float:
        """When an operation scheduled at ``start`` .. ``end`` that took ``real`` s ends: at ``end``, or
        ``factor`` x its real time after ``start`` if that is later (the place is busy until then)."""
        done = max(end, start + self.factor * real)
        with self._lock:
            self._free[place] = max(self._free[place], done)
        return done

    @contextmanager
    def occupy(self, nbytes: int) -> Iterator[None]:
        """Hold the operation of ``nbytes`` (the block runs it) for its modelled time."""
        place, start, end = self.schedule(self._clock(), nbytes)
        _sleep_until(start, self._clock)
        began = self._clock()
        yield
        _sleep_until(self.finished(place, start, end, self._clock() - began), self._clock)


def _sleep_until(t: float, clock: Callable[[], float]) -> None:
    while (left := t - clock()) > 0:
        time.sleep(left)


def _bytes(segments: object) -> int:
    return sum(length for _, length in segments)  # type: ignore[attr-defined]


class ModelledTrove:
    """A Trove whose recorded operations go through a :class:`Device`; ``full_bytes``: writes beyond so
    many bytes written fail with ENOSPC (a full server).  Anything else passes to the Trove."""

    def __init__(self, trove: object, device: Device, full_bytes: int | None = None) -> None:
        self._trove = trove
        self._device = device
        self._full = full_bytes
        self._written = 0
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> object:
        return getattr(self._trove, name)

    def write_list(self, handle: int, segments: list, data: object = None) -> int:
        nbytes = _bytes(segments)
        if self._full is not None:
            with self._lock:
                if self._written + nbytes > self._full:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                self._written += nbytes
        with self._device.occupy(nbytes):
            return self._trove.write_list(handle, segments, data)  # type: ignore[attr-defined]

    def read_list(self, handle: int, segments: list, out: object = None) -> int:
        with self._device.occupy(_bytes(segments)):
            return self._trove.read_list(handle, segments, out)  # type: ignore[attr-defined]

    def _op(name: str) -> Callable:  # type: ignore[misc]  # (a method of no bytes, through the device)
        def op(self: ModelledTrove, *args: object) -> object:
            with self._device.occupy(0):
                return getattr(self._trove, name)(*args)
        op.__name__ = name
        return op

    size = _op("size")
    create = _op("create")
    truncate = _op("truncate")
    flush = _op("flush")
    remove = _op("remove")


class ModelledMeta:
    """A metadata store whose operations go through a :class:`Device` (the server's disk, or its own
    under a load fault)."""

    def __init__(self, meta: object, device: Device) -> None:
        self._meta = meta
        self._device = device

    def __getattr__(self, name: str) -> object:
        attr = getattr(self._meta, name)
        if not callable(attr) or name == "close":
            return attr

        def op(*args: object, **kwargs: object) -> object:
            with self._device.occupy(0):
                return attr(*args, **kwargs)
        return op


class Link:
    """A server's network link, full duplex: each direction a :class:`Device` carrying its messages."""

    def __init__(self, model: DeviceModel, factor: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._in = Device(model, factor, clock)
        self._out = Device(model, factor, clock)

    def inbound(self, nbytes: int) -> None:
        """Return when a message of ``nbytes`` that has just come in has crossed the link."""
        with self._in.occupy(nbytes):
            pass

    def outbound(self, nbytes: int) -> None:
        """Return when a message of ``nbytes`` to send now has crossed the link (then it is sent)."""
        with self._out.occupy(nbytes):
            pass


def link_of(model: DeviceModel | None, fault: Fault | None) -> Link | None:
    """The link of a server with this net model and fault (None: the real socket, unmodelled)."""
    factor = fault.link_factor if fault else 1.0
    if model is None and factor == 1:
        return None
    return Link(model or NOMINAL_LINK, factor)


class Pause:
    """A server that serves nothing for ``length`` s from ``start`` s after its first request of the file
    system (pings and log requests pass and start nothing: a run's start and end are not held back)."""

    def __init__(self, start: float, length: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._start, self._length = start, length
        self._from: float | None = None
        self._lock = threading.Lock()

    def wait(self) -> None:
        """Return at once, or at the end of the pause if it is under way (the first call starts its clock)."""
        with self._lock:
            if self._from is None:
                self._from = self._clock() + self._start
        if self._from <= self._clock() < self._from + self._length:
            _sleep_until(self._from + self._length, self._clock)


def modelled(trove: object, meta: object | None, model: DeviceModel | None,
             fault: Fault | None) -> tuple[object, object | None]:
    """The Trove and metadata store of a server with this disk model and fault (themselves when neither
    changes anything)."""
    fault = fault or Fault()
    if model is None and fault.disk_factor == 1 and fault.meta_factor == 1 and fault.full_bytes is None:
        return trove, meta
    disk = Device(model or DeviceModel(), fault.disk_factor)
    trove = ModelledTrove(trove, disk, fault.full_bytes)
    if meta is not None:
        meta = ModelledMeta(meta, disk if fault.meta_factor == 1 else
                            Device(model or DeviceModel(), fault.meta_factor))
    return trove, meta
