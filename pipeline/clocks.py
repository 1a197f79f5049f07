"""Clock alignment: map every clock domain onto the reference clock (rank 0's host).

Each clock ``c`` maps as ``t + offset + drift * (t - t0)`` (per time window), estimated
from causal constraints, pairs of events where ``a`` must have happened before ``b``:

* request/response exchanges (the client's rpc rows): the client sent the request
  before the server received it, and the server sent the response before the client
  received it (four timestamps, two clocks).  This is the "operation the call waits
  for ends before the call ends" constraint, applied only where the wait is known:
  a call waits for the responses to its requests, not for every server event that
  carries its CallID (a write-back outlives the call; a read request's event ends
  after the data the client waited for has been sent);
* a server request caused by a call (the ``req`` event carries its CallIDs, all the
  ranks' for a collective) starts after the call started.  Disk operations lie
  inside their request on the same clock, so the request's bound implies theirs.

For a clock with local times ``x`` and reference times ``r``, the line
``offset + drift*(x - t0)`` must pass above the points ``y = r - x`` of "before" pairs
(lower bounds) and below those of "after" pairs (upper bounds).  Only the upper hull of
the lower bounds and the lower hull of the upper bounds can bind; the estimate is the
line of maximum minimum slack (a linear program over the hull points, in one variable), and
the guaranteed bound is the largest distance, over the window, from the estimate to any
line the constraints allow (drift at most 1000 ppm).  Infeasible sets are handled in
order: gross outliers against a robust first fit are dropped, then the window is split
in two where the halves fit markedly better (drift that changes; a feasible window is
split too when both halves do, so a slowly bending drift gets windows short enough to
be nearly straight), and a window that still cannot be satisfied gets a soft fit
minimising the total violation.

SQL (run by the merge's engine, DuckDB or Spark) builds the constraint pairs from the logs; numpy
does hulls, windows and lines, scipy the soft fits' linear programs, clock by clock, where the engine
holds the pairs (this process for DuckDB; Spark's executors, one task per clock).  Clocks reached
only through other clocks (ranks on other hosts talk only to servers) are aligned in a second round
against the already-aligned ones; their bound adds the bound of those clocks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from functools import partial
from typing import Protocol

import duckdb
import numpy as np
import pyarrow as pa

from callid_core.choices import ClockSync, listed
from callid_core.tables import CLOCKS
from pipeline.dialect import DUCKDB, Dialect

__all__ = ["Bounds", "ClockPairs", "Fit", "FitOne", "LocalPairs", "bounds", "create_clock_map", "estimate",
           "fit_clock", "inline_sql", "mapped", "moved_windows", "pairs_sql", "truth_errors"]

MAX_DRIFT = 1e-3  # |drift| at most 1000 ppm
MIN_WINDOW = 32  # constraints per window below which a window is not split further
MAX_DEPTH = 10  # at most 2**10 windows per clock
SPLIT_GAIN_NS = 200.0  # a window is split if its halves' least slack is larger by this much ...
SPLIT_GAIN_SHARE = 0.1  # ... and by this share of its own (a drift that changes within the window)
GROSS_FLOOR_NS = 1e6  # an outlier is off the robust fit by at least this much (1 ms) ...
GROSS_FACTOR = 20.0  # ... and by this many times the median distance of all constraints
SOFT_POINTS = 512  # per side: the block extremes a soft fit works on


@dataclass
class Fit:
    """The mapping of one clock over one time window, and how it was obtained."""

    clock: str
    win: int  # time window number, 0..
    t_from: int | None  # local ns: the window's constraints span t_from..t_to; the first and last
    t_to: int | None  # windows also map the times before and after them (None: no constraints)
    t0: int
    offset_ns: float
    drift_ppm: float
    bound_ns: float | None  # guaranteed +- error; None: not bounded (one-sided or soft fit)
    slack_ns: float | None  # the maximum minimum slack (negative: infeasible)
    quality: str  # reference, accurate, approximate, failed, none
    method: str  # reference, hull, soft, identity
    via: str  # the clocks whose constraints were used
    constraints: int = 0
    dropped: int = 0
    violations_before: int = 0
    violations_after: int = 0
    violation_ns: float = 0.0  # total violation left after a soft fit

    def map(self, t: np.ndarray) -> np.ndarray:
        return t + np.rint(self.offset_ns + self.drift_ppm * 1e-6 * (t - self.t0)).astype(np.int64)


#: the ``clocks`` table: a fit's fields, and after the clock its source (client or server)
CLOCKS_SCHEMA = CLOCKS.schema
assert [f.name for f in CLOCKS_SCHEMA if f.name != "source"] == [f.name for f in fields(Fit)]


# --------------------------------------------------------------------------- geometry


#: a hull's points are prefiltered against the hull of this many buckets' highest points
HULL_BUCKETS = 4096


def _hull(x: np.ndarray, y: np.ndarray, upper: bool) -> np.ndarray:
    """Indices of the upper (or lower) convex hull of points in any order, by increasing x.

    No vertex lies below the hull of the highest point of each of :data:`HULL_BUCKETS`
    buckets of x (found without sorting): only the points above it are sorted."""
    if not upper:
        y = -y
    idx = np.arange(len(x))
    lo, hi = (x.min(), x.max()) if len(x) else (0, 0)
    if len(x) > 4 * HULL_BUCKETS and hi > lo:
        bucket = ((x - lo) * ((HULL_BUCKETS - 1) / (hi - lo))).astype(np.intp)
        top = np.full(HULL_BUCKETS, -np.inf)
        np.maximum.at(top, bucket, y)
        tops = np.flatnonzero(y >= top[bucket])
        tops = tops[np.lexsort((y[tops], x[tops]))]  # (ties by y: the same hull whatever the order)
        h = tops[_prune(x[tops], y[tops])]
        inside = (x >= x[h[0]]) & (x <= x[h[-1]])
        idx = idx[~inside | (y >= np.interp(x, x[h], y[h]) - 1e-6)]
    idx = idx[np.lexsort((y[idx], x[idx]))]
    return idx[_prune(x[idx], y[idx])]


def _ascending(x: np.ndarray) -> bool:
    return bool(np.all(x[1:] >= x[:-1]))


def _prune(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Positions of the upper hull of points sorted by x (of equal x, a lower point is pruned
    unless it is first or last: harmless)."""
    idx = np.arange(len(x))
    while len(idx) > 2:  # vectorised pruning: a point on or below its neighbours' chord is not a vertex
        x0, x1, x2 = x[idx[:-2]], x[idx[1:-1]], x[idx[2:]]
        y0, y1, y2 = y[idx[:-2]], y[idx[1:-1]], y[idx[2:]]
        cross = (x2 - x0) * (y1 - y0) - (x1 - x0) * (y2 - y0)
        drop = np.r_[False, cross <= 0, False]
        if not drop.any():
            break
        idx = idx[~drop]
    return idx


def _max_min_slack(lx, ly, hx, hy, bmax: float) -> tuple[float, float, float]:
    """``(a, b, s)``: the line ``a + b*x`` maximising the least slack ``s`` (x normalised) over the hull
    points of both sides (each by increasing x).  With the constraints of one side only the slack has
    no maximum (the line could go as far as it likes from them): the line without drift that touches
    them, slack 0.

    For a drift ``b`` the best line lies midway between ``L(b) = max(ly - b*lx)`` and
    ``U(b) = min(hy - b*hx)``, its slack ``(U - L) / 2``: concave in ``b`` and linear between the
    slopes of the hulls' edges, where the binding point of a side changes.  Its maximum is at one of
    them or at ``+-bmax``: found by bisection over them, as exact as the linear program it replaces."""
    if not len(lx) or not len(hx):
        return (float(np.max(ly)) if len(lx) else float(np.min(hy))), 0.0, 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        edges = np.r_[np.diff(ly) / np.diff(lx), np.diff(hy) / np.diff(hx)]
    bs = np.unique(np.clip(np.r_[-bmax, bmax, edges[~np.isnan(edges)]], -bmax, bmax))

    def slack(b: float) -> tuple[float, float]:
        low, high = float(np.max(ly - b * lx)), float(np.min(hy - b * hx))
        return (low + high) / 2, (high - low) / 2

    first, last = 0, len(bs) - 1
    while first < last:  # the first candidate with the largest slack
        mid = (first + last) // 2
        if slack(bs[mid])[1] < slack(bs[mid + 1])[1]:
            first = mid + 1
        else:
            last = mid
    b = float(bs[first])
    if first + 1 < len(bs) and slack(bs[first + 1])[1] >= slack(b)[1]:  # (a flat top: its middle)
        b = float((bs[first] + bs[first + 1]) / 2)
    a, s = slack(b)
    return a, b, s


def _clip(poly: list[tuple[float, float]], ca: float, cb: float, c: float) -> list[tuple[float, float]]:
    """Sutherland-Hodgman: the part of a convex polygon in (a, b) where ``ca*a + cb*b <= c``."""
    out = []
    for i, p in enumerate(poly):
        q = poly[(i + 1) % len(poly)]
        fp, fq = ca * p[0] + cb * p[1] - c, ca * q[0] + cb * q[1] - c
        if fp <= 0:
            out.append(p)
        if (fp < 0 < fq) or (fq < 0 < fp):
            t = fp / (fp - fq)
            out.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])))
    return out


def _bound(lx, ly, hx, hy, a: float, b: float, bmax: float) -> float | None:
    """Largest |line - estimate| at the window's ends over all feasible lines; None if unbounded."""
    big = 1e12
    poly = [(-big, -bmax), (big, -bmax), (big, bmax), (-big, bmax)]
    for x, y in zip(lx, ly, strict=True):  # a + b x >= y
        poly = _clip(poly, -1.0, -x, -y)
    for x, y in zip(hx, hy, strict=True):  # a + b x <= y
        poly = _clip(poly, 1.0, x, y)
    if not poly:
        return None
    if any(abs(pa_) > big / 2 for pa_, _ in poly):
        return None
    v = np.array(poly)
    return float(max(np.abs(v[:, 0] - a + (v[:, 1] - b) * e).max() for e in (-1.0, 1.0)))


def _theil_sen(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    if len(x) < 2:
        return (float(y[0]) if len(y) else 0.0), 0.0
    i, j = np.triu_indices(len(x), 1)
    dx = x[j] - x[i]
    ok = dx != 0
    b = float(np.median((y[j] - y[i])[ok] / dx[ok])) if ok.any() else 0.0
    return float(np.median(y - b * x)), b


def _sorted(b: Bounds) -> Bounds:
    """``b`` by local time."""
    return b if _ascending(b.x) else b.take(np.argsort(b.x, kind="stable"))


def _blocks(x: np.ndarray, n: int) -> list[np.ndarray]:
    """Indices of the points in ``n`` blocks of consecutive local times."""
    return np.array_split(np.argsort(x, kind="stable"), min(n, len(x)))


def _block_medians(x: np.ndarray, y: np.ndarray, blocks: int = 48) -> tuple[np.ndarray, np.ndarray]:
    parts = _blocks(x, blocks)
    return (np.array([np.median(x[p]) for p in parts if len(p)]),
            np.array([np.median(y[p]) for p in parts if len(p)]))


def _robust_line(lx, ly, hx, hy) -> tuple[float, float]:
    """A first fit that outliers cannot move: Theil-Sen through block medians of each side."""
    lines = [_theil_sen(*_block_medians(x, y)) for x, y in ((lx, ly), (hx, hy)) if len(x)]
    return float(np.mean([a for a, _ in lines])), float(np.mean([b for _, b in lines]))


def _block_extremes(x: np.ndarray, y: np.ndarray, upper: bool) -> np.ndarray:
    """Indices of the highest (or lowest) point of each of ``SOFT_POINTS`` blocks."""
    if len(x) <= SOFT_POINTS:
        return np.arange(len(x))
    parts = _blocks(x, SOFT_POINTS)
    pick = np.argmax if upper else np.argmin
    return np.array([p[pick(y[p])] for p in parts])


def _soft_fit(lx, ly, hx, hy, bmax: float) -> tuple[float, float]:
    """The line minimising the total violation over block extremes of both sides."""
    li, hi = _block_extremes(lx, ly, True), _block_extremes(hx, hy, False)
    lx, ly, hx, hy = lx[li], ly[li], hx[hi], hy[hi]
    n_lo, n_hi = len(lx), len(hx)
    m = n_lo + n_hi
    a_ub = np.zeros((m, 2 + m))
    a_ub[:n_lo, 0], a_ub[:n_lo, 1] = -1, -lx
    a_ub[n_lo:, 0], a_ub[n_lo:, 1] = 1, hx
    a_ub[np.arange(m), 2 + np.arange(m)] = -1
    from scipy.optimize import linprog  # (an infeasible window's only: 0.4 s to import)

    big = 1e13
    res = linprog(np.r_[0, 0, np.ones(m)], A_ub=a_ub, b_ub=np.r_[-ly, hy],
                  bounds=[(-big, big), (-bmax, bmax)] + [(0, None)] * m, method="highs")
    if res.status != 0:  # pragma: no cover
        raise RuntimeError(f"clock alignment soft fit failed: {res.message}")
    return float(res.x[0]), float(res.x[1])


# --------------------------------------------------------------------------- fitting


@dataclass
class Bounds:
    """The constraints of one side (lower or upper bounds) of one clock, in any order (what needs
    them by local time sorts them: the hull's candidates, the blocks of the robust and soft fits)."""

    x: np.ndarray  # int64 local ns
    y: np.ndarray  # float64 ns: reference time - local time
    raw: np.ndarray  # bool: violated before alignment

    def take(self, sel) -> Bounds:
        return Bounds(self.x[sel], self.y[sel], self.raw[sel])


def fit_clock(clock: str, lo: Bounds, hi: Bounds, model: str, via: str = "") -> list[Fit]:
    """Fit one clock's windows from its lower-bound and upper-bound constraints."""
    if model == "none" or len(lo.x) + len(hi.x) == 0:
        quality = "none" if model == "none" else "failed"
        fit = Fit(clock=clock, win=0, t_from=None, t_to=None, t0=0, offset_ns=0.0, drift_ppm=0.0,
                  bound_ns=None, slack_ns=None, quality=quality, method="identity", via=via,
                  constraints=len(lo.x) + len(hi.x))
        _count(fit, lo, hi)
        return [fit]
    fits = _fit_window(clock, lo, hi, MAX_DRIFT if model == "drift" else 0.0, via, 0)
    for i, f in enumerate(fits):
        f.win = i
    return fits


def _halves(lo: Bounds, hi: Bounds) -> list[tuple[Bounds, Bounds]]:
    """The constraints split at their median local time (one part if they cannot be split)."""
    split = int(np.median(np.r_[lo.x, hi.x]))
    parts = []
    for left in (True, False):
        sel_lo, sel_hi = (lo.x < split) == left, (hi.x < split) == left
        if sel_lo.any() or sel_hi.any():
            parts.append((lo.take(sel_lo), hi.take(sel_hi)))
    return parts


@dataclass(frozen=True)
class _Window:
    """One window of a clock being fit: its constraints' local times ``t_from..t_to`` (centre ``t0``,
    half-width ``scale``: local times are normalised by them), their median ``y0`` (the fit is of
    ``y - y0``), the drift bound ``bmax`` on the normalised times, and the number of constraints."""

    clock: str
    via: str
    t_from: int
    t_to: int
    t0: int
    scale: float
    y0: float
    bmax: float
    constraints: int


@dataclass(frozen=True)
class _Line:
    """The line ``a + b*x`` of maximum minimum slack ``s`` in a window's normalised times, and the hull
    points (lower xs and ys, upper xs and ys) it was solved over."""

    a: float
    b: float
    s: float
    pts: tuple


def _fit_window(clock: str, lo: Bounds, hi: Bounds, drift_max: float, via: str, depth: int) -> list[Fit]:
    """The fits of one window: 1. gross outliers dropped, 2. split in two where the halves fit markedly
    better, else a hull fit (feasible) or 3. a soft fit (infeasible)."""
    w = _window(clock, lo, hi, drift_max, via)
    line = _solve(w, lo, hi)
    dropped = 0
    kept_lo, kept_hi = lo, hi
    if line.s < 0:  # 1. gross outliers against a robust first fit
        kept_lo, kept_hi, dropped = _drop_gross(w, lo, hi)
        if dropped:
            line = _solve(w, kept_lo, kept_hi)
    parts = _better_halves(w, kept_lo, kept_hi, line.s, drift_max, depth)
    if parts:
        return _split(w, parts, dropped, lo, hi, drift_max, depth)
    if line.s >= 0:
        fit = _hull_fit(w, line, kept_lo, kept_hi, dropped)
    else:
        fit = _soft(w, line, kept_lo, kept_hi, dropped)
    _count(fit, lo, hi, kept_lo, kept_hi)
    return [fit]


def _window(clock: str, lo: Bounds, hi: Bounds, drift_max: float, via: str) -> _Window:
    """The window the constraints ``lo`` and ``hi`` span."""
    xs = np.r_[lo.x, hi.x]
    t_from, t_to = int(xs.min()), int(xs.max())
    scale = max((t_to - t_from) / 2, 1.0)
    return _Window(clock=clock, via=via, t_from=t_from, t_to=t_to, t0=(t_from + t_to) // 2, scale=scale,
                   y0=float(np.median(np.r_[lo.y, hi.y])), bmax=drift_max * scale,
                   constraints=len(lo.x) + len(hi.x))


def _normalised(w: _Window, b: Bounds) -> tuple[np.ndarray, np.ndarray]:
    """``b``'s local times and ys in the window's normalised terms."""
    return (b.x - w.t0) / w.scale, b.y - w.y0


def _solve(w: _Window, lo: Bounds, hi: Bounds) -> _Line:
    """The line of maximum minimum slack over the hulls of ``lo`` and ``hi``."""
    (lx, ly), (hx, hy) = _normalised(w, lo), _normalised(w, hi)
    li, hi_idx = _hull(lx, ly, True), _hull(hx, hy, False)
    pts = (lx[li], ly[li], hx[hi_idx], hy[hi_idx])
    a, b, s = _max_min_slack(*pts, w.bmax)
    return _Line(a=a, b=b, s=s, pts=pts)


def _drop_gross(w: _Window, lo: Bounds, hi: Bounds) -> tuple[Bounds, Bounds, int]:
    """The constraints not grossly off a robust first fit, and how many were dropped (none: ``lo``
    and ``hi`` themselves)."""
    (lx, ly), (hx, hy) = _normalised(w, lo), _normalised(w, hi)
    ra, rb = _robust_line(lx, ly, hx, hy)
    rl, rh = ly - (ra + rb * lx), (ra + rb * hx) - hy  # > 0: on the wrong side
    gross = max(GROSS_FLOOR_NS, GROSS_FACTOR * float(np.median(np.abs(np.r_[rl, rh]))))
    keep_l, keep_h = rl <= gross, rh <= gross
    dropped = int((~keep_l).sum() + (~keep_h).sum())
    if dropped:
        return lo.take(keep_l), hi.take(keep_h), dropped
    return lo, hi, dropped


def _better_halves(w: _Window, lo: Bounds, hi: Bounds, s: float, drift_max: float,
                   depth: int) -> list[tuple[Bounds, Bounds]]:
    """2. The two halves of the window when they fit markedly better than its least slack ``s``
    (drift that changes), else none: for a feasible window, both halves (a bend); for an infeasible
    one, either (a kink).  Infeasible windows whose halves do no better are contradictory
    throughout: left to 3."""
    parts = []
    if depth < MAX_DEPTH and len(lo.x) + len(hi.x) >= 2 * MIN_WINDOW and drift_max > 0:
        parts = [p for p in _halves(lo, hi) if len(p[0].x) and len(p[1].x)]  # two-sided
    if len(parts) == 2:
        gain = (min if s >= 0 else max)(_solve(w, *p).s for p in parts) - s
        if gain > max(SPLIT_GAIN_NS, SPLIT_GAIN_SHARE * abs(s)):
            return parts
    return []


def _split(w: _Window, parts: list[tuple[Bounds, Bounds]], dropped: int, lo: Bounds, hi: Bounds,
           drift_max: float, depth: int) -> list[Fit]:
    """The fits of each half (the outliers ``dropped`` counted in the first), the raw violations of
    the window's constraints ``lo`` and ``hi`` attributed to the windows that hold them."""
    # (by local time from here on: windows within windows need no more sorting)
    parts = [(_sorted(lo_), _sorted(hi_)) for lo_, hi_ in parts]
    fits = [f for lo_, hi_ in parts for f in _fit_window(w.clock, lo_, hi_, drift_max, w.via, depth + 1)]
    fits[0].dropped += dropped
    for f in fits:
        f.violations_before = 0
    _count_many(fits, lo, hi)
    return fits


def _hull_fit(w: _Window, line: _Line, lo: Bounds, hi: Bounds, dropped: int) -> Fit:
    """The fit of a feasible window (constraints ``lo`` and ``hi`` kept): accurate when both sides pin
    the line, with its guaranteed bound."""
    a, b = line.a, line.b
    two_sided = len(lo.x) > 0 and len(hi.x) > 0
    if not two_sided:  # (one side only: the constraints bound the offset one way; no correction where
        lx, ly, hx, hy = line.pts  # they allow none, as clocks kept by NTP are, else the least they ask)
        a, b = (max(float(np.max(ly)), -w.y0) if len(lx) else min(float(np.min(hy)), -w.y0)), 0.0
    pinned = two_sided and (w.bmax == 0 or abs(b) < w.bmax * (1 - 1e-9))  # drift not at its limit
    if two_sided and not pinned and w.bmax > 0:  # (the drift left free: none, not an extreme)
        a0, _, s0 = _max_min_slack(*line.pts, 0.0)
        if s0 >= 0:
            a, b = a0, 0.0
    bound = _bound(*line.pts, a, b, w.bmax) if two_sided else None
    pinned = pinned and bound is not None
    return _fit(w, a, b, line.s, bound, "hull", "accurate" if pinned else "approximate", dropped)


def _soft(w: _Window, line: _Line, lo: Bounds, hi: Bounds, dropped: int) -> Fit:
    """3. The fit of an infeasible window (constraints ``lo`` and ``hi`` kept) minimising the total
    violation."""
    a, b = _soft_fit(*_normalised(w, lo), *_normalised(w, hi), w.bmax)
    return _fit(w, a, b, line.s, None, "soft", "approximate", dropped)


def _fit(w: _Window, a: float, b: float, slack: float, bound: float | None, method: str, quality: str,
         dropped: int) -> Fit:
    """The window's :class:`Fit` of the line ``a + b*x`` in its normalised terms."""
    return Fit(clock=w.clock, win=0, t_from=w.t_from, t_to=w.t_to, t0=w.t0, offset_ns=a + w.y0,
               drift_ppm=b / w.scale * 1e6, bound_ns=bound, slack_ns=slack, quality=quality, method=method,
               via=w.via, constraints=w.constraints, dropped=dropped)


def _slacks(fit: Fit, lo: Bounds, hi: Bounds) -> tuple[np.ndarray, np.ndarray]:
    line = lambda x: fit.offset_ns + fit.drift_ppm * 1e-6 * (x - fit.t0)  # noqa: E731
    return line(lo.x) - lo.y, hi.y - line(hi.x)


def _count(fit: Fit, lo: Bounds, hi: Bounds, kept_lo: Bounds | None = None,
           kept_hi: Bounds | None = None) -> None:
    """Violations before (raw times) over all constraints and after (this fit) over the kept ones."""
    fit.violations_before = int(lo.raw.sum() + hi.raw.sum())
    sl, sh = _slacks(fit, kept_lo or lo, kept_hi or hi)
    fit.violations_after = int((sl < 0).sum() + (sh < 0).sum())
    fit.violation_ns = max(0.0, float(-sl[sl < 0].sum() - sh[sh < 0].sum()))


def _count_many(fits: list[Fit], lo: Bounds, hi: Bounds) -> None:
    """Raw violations of a split window, attributed to the windows that hold them."""
    starts = np.array([f.t_from for f in fits[1:]])
    for side in (lo, hi):
        w = np.searchsorted(starts, side.x, side="right")
        counts = np.bincount(w[side.raw], minlength=len(fits))
        for f, c in zip(fits, counts, strict=True):
            f.violations_before += int(c)


# --------------------------------------------------------------------------- whole runs


def _map(fits: dict[int, list[Fit]], clock_ids: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Reference-clock times of local times ``t`` of the (aligned) clocks ``clock_ids``."""
    present = np.unique(clock_ids)
    moved = [c for c in map(int, present) if len(fits[c]) > 1 or fits[c][0].offset_ns or fits[c][0].drift_ppm]
    if not moved:  # (e.g. constraints against the reference clock only)
        return t
    out = t.copy()
    for cid in moved:
        m = clock_ids == cid
        windows = fits[cid]
        if len(windows) == 1:
            out[m] = windows[0].map(t[m])
            continue
        w = np.searchsorted(np.array([f.t_from for f in windows[1:]]), t[m], side="right")
        off = np.array([f.offset_ns for f in windows])[w]
        drift = np.array([f.drift_ppm for f in windows])[w] * 1e-6
        t0 = np.array([f.t0 for f in windows])[w]
        out[m] = t[m] + np.rint(off + drift * (t[m] - t0)).astype(np.int64)
    return out


NAMES_SQL = """
SELECT CAST(row_number() OVER (ORDER BY clock) - 1 AS INTEGER) AS id, clock, min(source) AS source
FROM (SELECT DISTINCT clock, 'client' AS source FROM client_log
      UNION SELECT DISTINCT clock, 'server' AS source FROM server_log) c
GROUP BY clock
"""


def pairs_sql(d: Dialect, clocks: list[str], servers: list[str], server_ids: list[int], ids: str) -> str:
    """SQL of the pairs (a, a_t) happened before (b, b_t): clock ids and local times.  Clock and
    server names become ids by position in the lists ``clocks`` (id order) and ``servers`` (their
    clocks' ids: ``server_ids``), which costs less than joining name tables on every row."""
    def clock_id(column: str) -> str:
        return f"{d.position(d.strings(clocks), column)} - 1"

    server_clock = d.at(d.ints(server_ids), d.position(d.strings(servers), "server"))
    return f"""
WITH rpc AS (  -- t_recv, t_send 0: no server times (e.g. a bad request)
    SELECT {clock_id("clock")} AS cc, t_start, t_end, t_recv, t_send, {server_clock} AS sc
    FROM client_log WHERE kind = 'rpc' AND t_recv > 0 AND t_send > 0
), req AS (  -- every request and each call it serves (of one call's requests to one server clock
    -- the earliest implies the others: they never bind, and finding it costs more than they do)
    SELECT {d.unnest("callids")} AS callid, {clock_id("clock")} AS sc, t_start AS q0
    FROM server_log WHERE layer = 'req'
), per_call AS (
    SELECT {clock_id("c.clock")} AS cc, c.t_start AS c0, q.sc, q.q0
    FROM req q JOIN client_log c ON c.callid = q.callid WHERE c.kind = 'call'
)
SELECT CAST(a AS {ids}) AS a, a_t, CAST(b AS {ids}) AS b, b_t FROM (
    SELECT cc AS a, t_start AS a_t, sc AS b, t_recv AS b_t FROM rpc
    UNION ALL SELECT sc, t_send, cc, t_end FROM rpc
    UNION ALL SELECT cc, c0, sc, q0 FROM per_call
) p WHERE a <> b
"""


#: what fits one clock from its pairs against aligned clocks (see :class:`ClockPairs`): its id, then its
#: pairs as the later end and as the earlier end, each (other clock, its time, this clock's time)
FitOne = Callable[[int, tuple, tuple], list[Fit]]


class ClockPairs(Protocol):
    """The constraint pairs of a run, held where the engine computed them."""

    def fit(self, done: np.ndarray, fit_one: FitOne) -> dict[int, list[Fit]]:
        """``fit_one`` of every clock not ``done`` (bool per clock id) with pairs against clocks that
        are, by clock id.  (It may run elsewhere: it takes and returns only picklable values.)"""


class LocalPairs:
    """The pairs streamed to this process, gathered by clock."""

    def __init__(self, pairs: pa.RecordBatchReader, n: int, ref: int) -> None:
        self.lo, self.hi = _by_clock(pairs, n, ref)

    def fit(self, done: np.ndarray, fit_one: FitOne) -> dict[int, list[Fit]]:
        nothing = (np.empty(0, np.int16), np.empty(0, np.int64), np.empty(0, np.int64))
        new = {}
        for cid in np.flatnonzero(~done[:-1]).tolist():
            lo = _with_done(self.lo.get(cid, nothing), done)
            hi = _with_done(self.hi.get(cid, nothing), done)
            if len(lo[2]) or len(hi[2]):
                new[cid] = fit_one(cid, lo, hi)
        return new


def estimate(rows: Callable[[str], list[tuple]], pairs: Callable[[str, int, int], ClockPairs], d: Dialect,
             model: str = "drift") -> dict[str, np.ndarray]:
    """The ``clocks`` table's columns (:data:`CLOCKS_SCHEMA`; numpy, nulls masked) of the logs in the
    views ``client_log`` and ``server_log`` of an engine that runs SQL of dialect ``d``: ``rows(sql)``
    fetches a small result, ``pairs(sql, n, ref)`` holds the constraint pairs (clock ids below ``n``;
    ``ref`` the reference clock's, never fitted)."""
    if model not in set(ClockSync):
        raise ValueError(f"unknown clock model {model!r}: choose {listed(ClockSync)}")
    with _small_pages():
        return _estimate(rows, pairs, d, model)


@contextmanager
def _small_pages() -> Iterator[None]:
    """numpy's arrays without its request for transparent huge pages, for a while: a huge page can
    cost a compaction of memory when it is first touched, and the constraints' arrays are touched
    once (on a shared machine, 4x the time of small pages for them)."""
    set_hugepage = getattr(getattr(np, "_core", np.core).multiarray, "_set_madvise_hugepage", None)
    before = set_hugepage(False) if set_hugepage else None
    try:
        yield
    finally:
        if set_hugepage:
            set_hugepage(before)


def _estimate(rows: Callable[[str], list[tuple]], pairs: Callable[[str, int, int], ClockPairs], d: Dialect,
              model: str) -> dict[str, np.ndarray]:
    listed_names = rows(NAMES_SQL)
    names = {i: clock for i, clock, _ in listed_names}
    source = {clock: src for _, clock, src in listed_names}
    ref_rows = rows("SELECT clock FROM client_log ORDER BY rank LIMIT 1")
    ref_name = ref_rows[0][0] if ref_rows else min(names.values(), default="")
    ref = next((i for i, n in names.items() if n == ref_name), -1)
    ids_of = {clock: i for i, clock in names.items()}
    servers = sorted(rows("SELECT DISTINCT server, clock FROM server_log"))
    servers = list({server: ids_of[clock] for server, clock in servers}.items())
    ids = "SMALLINT" if len(names) < 2**15 else "INTEGER"
    n = len(names) + 1
    held = pairs(pairs_sql(d, [names[i] for i in sorted(names)], [s for s, _ in servers],
                           [i for _, i in servers], ids), n, ref)
    fits: dict[int, list[Fit]] = {}
    if ref >= 0:
        fits[ref] = [Fit(clock=ref_name, win=0, t_from=None, t_to=None, t0=0, offset_ns=0.0, drift_ppm=0.0,
                         bound_ns=0.0, slack_ns=None, quality="reference", method="reference", via="")]
    while True:  # one round: every clock with constraints against the clocks aligned so far
        done = np.zeros(n, dtype=bool)
        done[list(fits)] = True
        new = held.fit(done, partial(_fit_one, fits=fits, names=names, model=model, n=n))
        if not new:
            break
        fits.update(new)
    none = bounds(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, bool))
    for cid, name in names.items():  # clocks no constraint reaches
        if cid not in fits:
            fits[cid] = fit_clock(name, none, none, model)
    fitted = [asdict(f) for cid in sorted(fits, key=lambda c: names[c]) for f in fits[cid]]
    return _columns([{"source": source.get(f["clock"]), **f} for f in fitted])


def _columns(rows: list[dict]) -> dict[str, np.ndarray]:
    """``rows`` as numpy columns of :data:`CLOCKS_SCHEMA`'s types, nulls masked: DuckDB reads them as
    they are (a pyarrow table built from Python values imports pandas: 0.2 s of every merge)."""
    out = {}
    for field in CLOCKS_SCHEMA:
        values = [r[field.name] for r in rows]
        if pa.types.is_string(field.type):
            out[field.name] = np.array(values, dtype=object)
        else:
            out[field.name] = np.ma.masked_array([0 if v is None else v for v in values],
                                                 [v is None for v in values], field.type.to_pandas_dtype())
    return out


def _fit_one(cid: int, lo_pairs: tuple, hi_pairs: tuple, *, fits: dict[int, list[Fit]], names: dict[int, str],
             model: str, n: int) -> list[Fit]:
    """:data:`FitOne`: clock ``cid``'s windows from its pairs against the clocks of ``fits``; the bound
    of each adds the largest of theirs."""
    lo_other, lo_t, lo_x = lo_pairs
    hi_other, hi_t, hi_x = hi_pairs
    lo = bounds(lo_x, _map(fits, lo_other, lo_t), lo_t > lo_x)
    hi = bounds(hi_x, _map(fits, hi_other, hi_t), hi_t < hi_x)
    others = _ids(n, lo_other, hi_other)
    fitted = fit_clock(names[cid], lo, hi, model, ",".join(names[o] for o in others))
    inherited = max((f.bound_ns or 0.0) for o in others for f in fits[o])
    for f in fitted:
        if f.bound_ns is not None:
            f.bound_ns += inherited
    return fitted


def _with_done(pairs: tuple[np.ndarray, ...], done: np.ndarray) -> tuple[np.ndarray, ...]:
    """Of one clock's ``pairs`` (other clock, its time, this clock's time), those whose other
    clock is ``done``."""
    keep = done[pairs[0]]
    return pairs if keep.all() else tuple(column[keep] for column in pairs)


def _by_clock(pairs: pa.RecordBatchReader, n: int, ref: int) -> tuple[dict[int, tuple], dict[int, tuple]]:
    """Per clock id (below ``n``; not ``ref``, the reference clock, never fitted), its pairs as the
    later end (lower bounds: the other clock, its time, this clock's time) and as the earlier end
    (upper bounds), gathered a batch at a time as the query streams them (it is never held whole),
    then joined clock by clock."""
    lo: dict[int, list[list[np.ndarray]]] = {}
    hi: dict[int, list[list[np.ndarray]]] = {}
    for batch in pairs:
        a, a_t, b, b_t = (_numpy(batch.column(k)) for k in ("a", "a_t", "b", "b_t"))
        for key, values, parts in ((b, (a, a_t, b_t), lo), (a, (b, b_t, a_t), hi)):
            counts = np.bincount(key, minlength=n)
            present = [c for c in np.flatnonzero(counts).tolist() if c != ref]
            # (a radix sort, then a slice per clock: beyond two clocks, 5x faster than a mask per clock)
            order = np.argsort(key, kind="stable") if len(present) > 2 else None
            starts = np.cumsum(counts) - counts
            for c in present:
                rows = key == c if order is None else order[starts[c]:starts[c] + counts[c]]
                for part, column in zip(parts.setdefault(c, [[], [], []]), values):
                    part.append(column[rows])
    joined = []
    for parts in (lo, hi):
        out = {}
        for c in list(parts):
            out[c] = tuple(np.concatenate(p) for p in parts.pop(c))  # (its pieces freed as it goes)
        joined.append(out)
    return joined[0], joined[1]


def _numpy(column: pa.Array) -> np.ndarray:
    """A column of integers without nulls, as numpy without a copy (pyarrow's ``to_numpy`` imports
    pandas: 0.2 s of every merge)."""
    if column.null_count:  # pragma: no cover - the pairs' columns are never null
        raise ValueError("a clock constraint with a null time")
    dtype = np.dtype(column.type.to_pandas_dtype())
    return np.frombuffer(column.buffers()[1], dtype, len(column), column.offset * dtype.itemsize)


def _ids(n: int, *arrays: np.ndarray) -> list[int]:
    """The distinct clock ids (below ``n``) in ``arrays``, in order."""
    seen = np.zeros(n, dtype=bool)
    for ids in arrays:
        seen |= np.bincount(ids, minlength=n).astype(bool)
    return np.flatnonzero(seen).tolist()


def bounds(x: np.ndarray, ref: np.ndarray, raw: np.ndarray) -> Bounds:
    """One side's constraints: local times ``x`` of a clock, the reference times ``ref`` of the
    other ends, and whether each was violated before alignment (in any order)."""
    return Bounds(x, (ref - x).astype(np.float64), raw)


def mapped(column: str, alias: str) -> str:
    """SQL: local time ``column`` on the reference clock, with window ``alias`` of ``clock_map``."""
    return (f"({column} + coalesce(CAST(round({alias}.offset_ns + {alias}.drift * "
            f"({column} - {alias}.t0)) AS BIGINT), 0))")


def create_clock_map(con: duckdb.DuckDBPyConnection) -> str:
    """Temp table ``clock_map`` (clock, t_from, t0, offset_ns, drift) of the ``clocks`` table.

    Returns how to apply it: ``identity`` (no clock moves), ``single`` (one window per
    clock: join on the clock) or ``windowed`` (ASOF join on the clock and ``t_from``).
    """
    con.execute("""
        CREATE OR REPLACE TEMP TABLE clock_map AS
        SELECT clock, win, CASE WHEN win = 0 THEN -4611686018427387904 ELSE t_from END AS t_from,
               t0, offset_ns, drift_ppm * 1e-6 AS drift
        FROM clocks
    """)
    moved, windows = con.execute("SELECT count(*) FILTER (WHERE offset_ns <> 0 OR drift <> 0), "
                                 "max(win) FROM clock_map").fetchone()
    return "identity" if not moved else "windowed" if windows else "single"


#: a mapping of at most this many clocks and windows is written into the SQL that reads the times (lists
#: of the clocks' names and parameters, no join); a larger one is applied by joining ``clock_map``
INLINE_CLOCKS, INLINE_WINDOWS = 64, 1024

#: one window of a moved clock: (t_from, t0, offset_ns, drift); the first window starts at -inf
Window = tuple[int, int, float, float]


def moved_windows(con: duckdb.DuckDBPyConnection, lo: int, hi: int) -> dict[str, list[Window]]:
    """The windows of every clock ``clock_map`` moves by at least a nanosecond somewhere in
    ``[lo, hi]`` (local times), by clock name, ordered by start.  (A window's shift is linear in
    the time: if it rounds to 0 at both ends, it does everywhere between.)"""
    rows = con.execute("SELECT clock, t_from, t0, offset_ns, drift FROM clock_map ORDER BY clock, win")
    out: dict[str, list[Window]] = {}
    for clock, *window in rows.fetchall():
        out.setdefault(clock, []).append(tuple(window))
    return {clock: ws for clock, ws in out.items()
            if any(abs(off + drift * (t - t0)) >= 0.5 for _, t0, off, drift in ws for t in (lo, hi))}


def inline_sql(t: str, key: str, windows: dict[str, list[Window]], d: Dialect = DUCKDB) -> str:
    """SQL (dialect ``d``): local time ``t`` (an expression) on the reference clock, with the windows of
    the clock ``key`` (an expression) names in ``windows`` (others do not move).  The clocks' names and
    parameters are constant lists: a row looks its clock up (and, if it has several windows, counts
    the window starts before ``t``), without a join, and pays nothing when ``t`` is not read."""
    if not windows:
        return t
    names = sorted(windows)
    flat = [w for n in names for w in windows[n]]
    clock = d.position(d.strings(names), key)
    if len(flat) == len(names):  # one window each
        w = clock
    else:
        first = d.ints([1 + sum(len(windows[m]) for m in names[:i]) for i in range(len(names))])
        starts = d.array(d.ints([w[0] for w in windows[n][1:]]) for n in names)
        w = f"({d.at(first, clock)} + {d.size(d.filter(d.at(starts, clock), 's', f's <= {t}'))})"
    t0 = d.ints([f[1] for f in flat])
    offset, drift = d.doubles([f[2] for f in flat]), d.doubles([f[3] for f in flat])
    return (f"({t} + coalesce(CAST(round({d.at(offset, w)} + {d.at(drift, w)} * ({t} - {d.at(t0, w)})) "
            "AS BIGINT), 0))")


def truth_errors(con: duckdb.DuckDBPyConnection, clocks: list[dict] | None = None,
                 samples: int = 257) -> dict[str, float]:
    """Max |estimate - truth| (ns) per clock, from the injected skews in the run configuration.

    ``clocks`` are rows like the ``clocks`` table's (default: that table), so that other
    estimates can be checked against the same truth."""
    from callid_core.clock import Skew, skews_from_json

    row = con.execute("SELECT value FROM run WHERE key = 'client.config'").fetchone()
    config = json.loads(row[0]) if row else {}
    skews = skews_from_json(config.get("clock_skew"))
    t0 = int(config.get("clock_t0", 0))
    if clocks is None:
        cur = con.execute("SELECT * FROM clocks ORDER BY clock, win")
        clocks = [dict(zip([d[0] for d in cur.description], row, strict=True)) for row in cur.fetchall()]
    ref = next((c["clock"] for c in clocks if c["quality"] == "reference"), "host0")
    ref_skew = skews.get(ref)
    out: dict[str, float] = {}
    for c in clocks:
        if c["t_from"] is None:
            continue
        lo, hi = c["t_from"], c["t_to"]
        t = np.linspace(lo, hi, samples).astype(np.int64)
        skew, none = skews.get(c["clock"]), Skew()
        dt = (t - t0).astype(np.float64)
        u = dt  # machine time since t0 at local time t: u = dt - delta(u), a fixed point
        for _ in range(4):
            u = dt - (skew or none).delta(u)
        truth = (ref_skew or none).delta(u) - (skew or none).delta(u)  # reference reading - local
        est = c["offset_ns"] + c["drift_ppm"] * 1e-6 * (t - c["t0"]).astype(np.float64)
        out[c["clock"]] = max(out.get(c["clock"], 0.0), float(np.abs(est - truth).max()))
    return out
