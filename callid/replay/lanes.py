"""Threads that make a replayer's calls side by side, each with its own file-system client and log.

One replayer process drives many source ranks; a rank whose previous call has completed must not
wait behind another rank's call (``--timing asap`` starts it at once).  A lane is one thread with its
own :class:`SysInt` (its own connections to the servers) and its own client log; the lanes of a
process share only the request ids (``SysInt(seq=...)``), so that a source rank's requests stay
unique whichever lane sends them.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from callid.mpiio.sysint import SysInt
from callid.trace import ClientTrace
from callid_core.config import Config

__all__ = ["Lane", "Lanes"]

T = TypeVar("T")


class Lane:
    """One thread's file-system client and client log."""

    def __init__(self, config: Config, replayer: int, number: int, seq: Iterator[int]) -> None:
        self.trace = ClientTrace(config.trace_dir, replayer, config.callid_layout, config.run_id,
                                 config.to_json(), clock="host0", flush_rows=config.flush_rows,
                                 name=f"client-replayer{replayer:06d}-{number:03d}")
        self.sysint = SysInt(config, replayer, self.trace.rpc, self.trace.phase, seq=seq)
        self._scratch = bytearray()

    def scratch(self, size: int) -> memoryview:
        """A buffer of ``size`` bytes for what this lane reads (reused)."""
        if len(self._scratch) < size:
            self._scratch = bytearray(size)
        return memoryview(self._scratch)[:size]

    def as_rank(self, rank: int) -> None:
        """Log and send what follows on behalf of source rank ``rank``."""
        self.trace.rank = self.sysint.rank = rank

    def close(self) -> None:
        self.sysint.close()
        self.trace.close()


class Lanes:
    """``n`` lanes, each run by its own thread, waiting for work."""

    def __init__(self, config: Config, replayer: int, n: int) -> None:
        seq = itertools.count(1)
        self.lanes = [Lane(config, replayer, k, seq) for k in range(n)]
        self._work: list[queue.SimpleQueue] = [queue.SimpleQueue() for _ in self.lanes]
        self._done: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._serve, args=(lane, work), daemon=True,
                                          name=f"lane-{k}")
                         for k, (lane, work) in enumerate(zip(self.lanes, self._work))]
        for t in self._threads:
            t.start()

    def _serve(self, lane: Lane, work: queue.SimpleQueue) -> None:
        while (fn := work.get()) is not None:
            try:
                fn(lane)
            except BaseException as exc:  # (handed to the caller of each)
                self._done.put(exc)
            else:
                self._done.put(None)

    def each(self, fn: Callable[[Lane], None]) -> None:
        """Run ``fn(lane)`` on every lane at once; return when all have returned (raise the first
        exception one raised)."""
        for work in self._work:
            work.put(fn)
        errors = [e for e in (self._done.get() for _ in self._work) if e is not None]
        if errors:
            raise errors[0]

    def map(self, fn: Callable[[Lane, T], None], items: Iterable[T]) -> None:
        """``fn(lane, item)`` for every item, the lanes taking the items in turn."""
        todo = iter(items)
        lock = threading.Lock()

        def take(lane: Lane) -> None:
            while True:
                with lock:
                    item = next(todo, _END)
                if item is _END:
                    return
                fn(lane, item)

        self.each(take)

    def flush(self) -> None:
        """Close every lane's log (what a stopped replayer keeps)."""
        for lane in self.lanes:
            lane.trace.close()

    def close(self) -> None:
        for work in self._work:
            work.put(None)
        for t in self._threads:
            t.join()
        for lane in self.lanes:
            lane.close()


_END = object()
