"""The track layout the exports share: which process and thread (track) each event goes on.

* **Processes.**  ``MPI ranks`` (pid 1), then one per server, ``server NAME`` (pid 2, 3, ... in name
  order).
* **Threads.**  Rank ``r``'s calls are on thread ``rank r``, tid ``r + 1`` (tids start at 1: tid 0 is
  the idle thread to some viewers).  A server's events are on one thread per layer (``req``,
  ``flow``, ``trove``, ``meta``).  Every tid is unique across processes.
* **Lanes.**  A thread's slices must nest or follow each other (trace viewers drop or truncate slices
  that partially overlap), so events of one rank or layer that overlap in time go to extra threads,
  *lanes*, ``rank r #2``, ``trove #2``, ...: an event takes a lane free at its start (the most recently
  freed one), a new lane only when all are busy, so a rank or layer has as many lanes as it has events
  at once at most.  Extra lanes get tids after the ranks' (``max_rank + 2`` on), in order of creation.

:class:`LaneAssigner` computes the lanes of intervals arriving in order of start, a batch at a time,
with numpy (no loop per event); :class:`Layout` turns lanes into threads and names, and reports each
thread once, when it is made, so a writer can declare it before its first event.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from callid_core.choices import SERVER_LAYERS

__all__ = ["LANE_SORT", "LAYERS", "RANKS_PID", "LaneAssigner", "Layout", "Thread"]

#: the process of the ranks' threads
RANKS_PID = 1
#: the order of a server's layers (others after them, by name)
LAYERS = SERVER_LAYERS
#: lanes of one rank or layer sort before the next one's: sort index = group * LANE_SORT + lane (capped)
LANE_SORT = 64

_I64 = np.int64


@dataclass(frozen=True)
class Thread:
    """One track: a lane of a rank or of a server's layer."""

    pid: int
    tid: int
    process: str  # the process's name: 'MPI ranks', 'server io0'
    name: str  # 'rank 3', 'rank 3 #2', 'trove', 'trove #2'
    sort: int  # order among the process's threads

    @property
    def uuid(self) -> int:
        """A track id unique in the trace (Perfetto's track uuid)."""
        return self.pid << 32 | self.tid


def lane_name(base: str, lane: int) -> str:
    """The name of lane ``lane`` (from 0) of a rank or layer named ``base``."""
    return base if lane == 0 else f"{base} #{lane + 1}"


class LaneAssigner:
    """Lanes for intervals [start, end) on ``n_tracks`` tracks, fed in batches in order of start.

    Each interval takes the lane freed most recently on its track (a stack of free lanes), or a new
    lane when none is free; an interval ending at t frees its lane for one starting at t.  Computed
    per batch as bracket matching (an end pushes its lane, a start pops one) with sorts and a
    pointer-jumping pass; the state carried between batches is the free lanes and the intervals still
    running, bounded by the lanes in use.
    """

    def __init__(self, n_tracks: int) -> None:
        self.lanes = np.zeros(n_tracks, _I64)  # lanes made per track
        self._free = (np.empty(0, _I64), np.empty(0, _I64))  # (track, lane), per track bottom to top
        self._busy = (np.empty(0, _I64), np.empty(0, _I64), np.empty(0, _I64))  # (track, end, lane)
        self._last = np.iinfo(_I64).min

    def assign(self, track: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """The lanes of a batch of intervals (sorted by start, starting no earlier than the last
        batch's; ``end > start``)."""
        track, start, end = (np.asarray(a, _I64) for a in (track, start, end))
        n = len(track)
        if n == 0:
            return np.empty(0, _I64)
        if start[0] < self._last or np.any(start[1:] < start[:-1]):
            raise ValueError("intervals must come in order of start")
        last = self._last = int(start[-1])
        free_track, free_lane = self._free
        busy_track, busy_end, busy_lane = self._busy
        done = busy_end <= last  # running intervals that end by the batch's last start
        own = np.flatnonzero(end <= last)
        idx = np.arange(n, dtype=_I64)
        # events: free lanes (pushed long ago), ends of earlier intervals, ends and starts of this batch
        ev_track = np.concatenate([free_track, busy_track[done], track[own], track])
        ev_time = np.concatenate([np.full(len(free_track), np.iinfo(_I64).min, _I64), busy_end[done],
                                  end[own], start])
        n_known = len(free_track) + int(done.sum())
        is_start = np.zeros(len(ev_track), bool)
        is_start[-n:] = True
        ev_lane = np.concatenate([free_lane, busy_lane[done], np.full(len(own) + n, -1, _I64)])
        ev_op = np.concatenate([np.full(n_known, -1, _I64), own, idx])
        # in time order per track, ends before starts at equal times (free stack order kept)
        order = np.lexsort((np.arange(len(ev_track)), is_start, ev_time, ev_track))
        tr, st, lane_k, op = ev_track[order], is_start[order], ev_lane[order], ev_op[order]
        step = np.where(st, -1, 1)
        height = np.cumsum(step)
        first = np.flatnonzero(np.r_[True, tr[1:] != tr[:-1]])
        group = np.cumsum(np.r_[True, tr[1:] != tr[:-1]]) - 1
        height -= (height[first] - step[first])[group]  # per track, from 0
        level = height - (~st)  # an end crosses (h, h + 1) upwards, a start crosses it downwards
        # per (track, level) crossings alternate: a start follows the end it pops, or is the first
        # (a level below 0: a new lane)
        by = np.lexsort((np.arange(len(tr)), level, tr))
        tr_b, lv_b, st_b = tr[by], level[by], st[by]
        same_prev = np.r_[False, (tr_b[1:] == tr_b[:-1]) & (lv_b[1:] == lv_b[:-1])]
        same_next = np.r_[same_prev[1:], False]

        lanes = np.full(n, -1, _I64)
        ptr = np.full(n, -1, _I64)
        starts = np.flatnonzero(st_b)
        matched = starts[same_prev[starts]]
        new = starts[~same_prev[starts]]
        j = op[by[matched]]  # the starting intervals
        e = by[matched - 1]  # the ends they pop
        known = lane_k[e] >= 0
        lanes[j[known]] = lane_k[e[known]]
        ptr[j[~known]] = op[e[~known]]
        jn = op[by[new]]
        lanes[jn] = self.lanes[tr_b[new]] + (-lv_b[new] - 1)
        while True:  # follow the chains of lanes handed on within the batch (doubling)
            todo = np.flatnonzero(lanes < 0)
            if len(todo) == 0:
                break
            p = ptr[todo]
            lanes[todo] = lanes[p]
            ptr[todo] = ptr[p]
        if len(new):
            np.maximum.at(self.lanes, tr_b[new], self.lanes[tr_b[new]] - lv_b[new])

        # free lanes now: the ends no start popped, per track in level order (bottom to top)
        left = np.flatnonzero(~st_b & ~same_next)
        ev_left = by[left]
        lane_left = np.where(lane_k[ev_left] >= 0, lane_k[ev_left], lanes[np.maximum(op[ev_left], 0)])
        self._free = (tr[ev_left], lane_left)  # (already in track, level order)
        keep = ~done
        later = np.flatnonzero(end > last)
        self._busy = (np.concatenate([busy_track[keep], track[later]]),
                      np.concatenate([busy_end[keep], end[later]]),
                      np.concatenate([busy_lane[keep], lanes[later]]))
        return lanes


class _Tids:
    """tid per (group, lane), growing as lanes are made."""

    def __init__(self, n_groups: int) -> None:
        self.table = np.zeros((n_groups, 1), np.int32)  # 0: no thread yet

    def get(self, group: np.ndarray, lane: np.ndarray) -> np.ndarray:
        return self.table[group, lane].astype(_I64)

    def set(self, group: int, lane: int, tid: int) -> None:
        if lane >= self.table.shape[1]:
            grown = np.zeros((self.table.shape[0], max(lane + 1, 2 * self.table.shape[1])), np.int32)
            grown[:, :self.table.shape[1]] = self.table
            self.table = grown
        self.table[group, lane] = tid


class Layout:
    """Threads of an export: lanes of the ranks (group: the rank) and of the servers' layers (group:
    an index into ``server_tracks``, the (server, layer) pairs, see :meth:`order_server_tracks`)."""

    def __init__(self, max_rank: int, server_tracks: list[tuple[str, str]]) -> None:
        self.server_tracks = list(server_tracks)
        self.servers = sorted({s for s, _ in self.server_tracks})
        self.server_pid = {s: RANKS_PID + 1 + i for i, s in enumerate(self.servers)}
        self.rank_lanes = LaneAssigner(max_rank + 1)
        self.op_lanes = LaneAssigner(len(self.server_tracks))
        self._rank_tids = _Tids(max_rank + 1)
        self._op_tids = _Tids(len(self.server_tracks))
        self._next_tid = max_rank + 2
        self._layer_index = {(s, layer): _layer_order(layer) for s, layer in self.server_tracks}
        self._new: list[Thread] = []
        self.threads: list[Thread] = []

    @staticmethod
    def order_server_tracks(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """(server, layer) pairs in layout order: by server, then layer (req, flow, trove, meta, others)."""
        return sorted(set(pairs), key=lambda p: (p[0], _layer_order(p[1]), p[1]))

    def processes(self) -> list[tuple[int, str]]:
        """(pid, name) of every process, ranks first."""
        return [(RANKS_PID, "MPI ranks")] + [(pid, f"server {s}") for s, pid in self.server_pid.items()]

    def rank_threads(self, rank: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """The tids of a batch of calls (sorted by start)."""
        lanes = self.rank_lanes.assign(rank, start, end)
        self._made(self._rank_tids, rank, lanes, self._rank_thread)
        return self._rank_tids.get(np.asarray(rank, _I64), lanes)

    def op_threads(self, track: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """The tids of a batch of server events (sorted by start); ``track`` indexes ``server_tracks``."""
        lanes = self.op_lanes.assign(track, start, end)
        self._made(self._op_tids, track, lanes, self._op_thread)
        return self._op_tids.get(np.asarray(track, _I64), lanes)

    def take_new(self) -> list[Thread]:
        """The threads made since the last call."""
        new, self._new = self._new, []
        return new

    def _made(self, tids: _Tids, group: np.ndarray, lanes: np.ndarray, make) -> None:
        """Record the threads of the lanes made by the last batch (a bounded loop: one per new lane)."""
        known = tids.table.shape[1]
        fresh = lanes >= known
        fresh[~fresh] = tids.get(np.asarray(group, _I64)[~fresh], lanes[~fresh]) == 0
        if not fresh.any():
            return
        pairs = np.unique(np.stack([np.asarray(group, _I64)[fresh], lanes[fresh]], axis=1), axis=0)
        for g, lane in sorted(map(tuple, pairs.tolist()), key=lambda p: (p[1], p[0])):
            thread = make(int(g), int(lane))
            tids.set(int(g), int(lane), thread.tid)
            self._new.append(thread)
            self.threads.append(thread)

    def _rank_thread(self, rank: int, lane: int) -> Thread:
        if lane == 0:
            tid = rank + 1
        else:
            tid, self._next_tid = self._next_tid, self._next_tid + 1
        return Thread(RANKS_PID, tid, "MPI ranks", lane_name(f"rank {rank}", lane),
                      rank * LANE_SORT + min(lane, LANE_SORT - 1))

    def _op_thread(self, track: int, lane: int) -> Thread:
        server, layer = self.server_tracks[track]
        tid, self._next_tid = self._next_tid, self._next_tid + 1
        return Thread(self.server_pid[server], tid, f"server {server}", lane_name(layer, lane),
                      self._layer_index[(server, layer)] * LANE_SORT + min(lane, LANE_SORT - 1))


def _layer_order(layer: str) -> int:
    return LAYERS.index(layer) if layer in LAYERS else len(LAYERS)
