"""Byte sizes written as ``65536``, ``64KiB``, ``1MiB``; durations written as ``250ms``, ``1h``; rank
ranges written as ``0-63,100``; time windows written as ``2s:10s``."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass

from callid_core.errors import BadValue

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30,
          "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40}
#: units that mean powers of 1000 to DuckDB and 1024 to others: taken only where DuckDB's meaning holds
_DECIMAL = {"kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_SIZE = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str | int, decimal: bool = False) -> int:
    """Parse a byte size; binary units (KiB = K = 1024).  ``decimal``: KB, MB, GB, TB are powers of
    1000 (as DuckDB takes a memory limit); else they are refused as ambiguous.  Raise
    :class:`BadValue` with the reason."""
    if isinstance(text, int):
        return text
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else None
    if match and unit in _DECIMAL:
        if decimal:
            return int(match.group(1)) * _DECIMAL[unit]
        n, binary = int(match.group(1)), unit[0].upper() + "iB"
        raise BadValue(f"{text!r} is ambiguous (1000 or 1024?): write {n}{binary} "
                       f"({n * _UNITS[unit[0]]} bytes) or {n * _DECIMAL[unit]}")
    if not match or unit not in _UNITS:
        raise BadValue(f"{text!r} is not a size (examples: 65536, 64KiB, 1MiB)")
    return int(match.group(1)) * _UNITS[unit]


def format_size(n: int) -> str:
    """``65536`` -> ``64KiB``: the largest binary unit that divides ``n`` (how defaults are shown)."""
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n and n % factor == 0:
            return f"{n // factor}{unit}"
    return str(n)


#: nanoseconds per time unit (durations, clock offsets)
TIME_UNITS_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
                 "min": 60_000_000_000, "h": 3_600_000_000_000}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s|min|h)?\s*$")


def human_size(n: int) -> str:
    """``2147483648`` -> ``2.00 GiB``: a size to read (three significant digits), not to parse back."""
    for unit, factor in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= factor:
            return f"{n / factor:.3g} {unit}"
    return f"{n} B"


def parse_duration(text: str) -> float:
    """Parse a duration into ns (no unit: seconds).  Raise :class:`BadValue` with the reason."""
    match = _DURATION.match(text)
    if not match:
        raise BadValue(f"{text!r} is not a duration (examples: 1h, 30s, 250ms)")
    return float(match.group(1)) * TIME_UNITS_NS[match.group(2) or "s"]


#: the largest rank a log holds (its ``rank`` column is int32)
MAX_RANK = (1 << 31) - 1


@dataclass(frozen=True)
class RankSet:
    """Ranks as sorted, disjoint ranges ``(lo, hi)`` (inclusive): ``0-99999999`` costs two numbers."""

    ranges: tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, ranks: Iterable[int]) -> RankSet:
        """The ranks of an iterable of numbers."""
        return cls.spanning((r, r) for r in ranks)

    @classmethod
    def spanning(cls, spans: Iterable[tuple[int, int]]) -> RankSet:
        """The ranks of ranges ``(lo, hi)`` in any order, overlapping or touching (merged here)."""
        merged: list[tuple[int, int]] = []
        for lo, hi in sorted(spans):
            if merged and lo <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
            else:
                merged.append((lo, hi))
        return cls(tuple(merged))

    def __contains__(self, rank: object) -> bool:
        if not isinstance(rank, int):
            return False
        i = bisect.bisect_right(self.ranges, (rank, MAX_RANK + 1)) - 1
        return i >= 0 and self.ranges[i][0] <= rank <= self.ranges[i][1]

    def __len__(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.ranges)


def parse_ranks(text: str) -> RankSet:
    """``0-63,100`` -> the ranks; raise :class:`BadValue`."""
    spans: list[tuple[int, int]] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi or lo)
        except ValueError:
            raise BadValue(f"--ranks: {part!r} is not a rank or a range like 0-63") from None
        if a < 0 or b < a:
            raise BadValue(f"--ranks: {part!r} is not a range of ranks")
        if b > MAX_RANK:
            raise BadValue(f"--ranks: {part!r} goes beyond {MAX_RANK}, the largest rank a log holds")
        spans.append((a, b))
    if not spans:
        raise BadValue("--ranks: no ranks given")
    return RankSet.spanning(spans)


def parse_window(text: str) -> tuple[float, float]:
    """``START:END`` (durations from the source run's start; either may be empty) -> ns."""
    lo, sep, hi = text.partition(":")
    if not sep:
        raise BadValue(f"--window: {text!r} is not START:END, e.g. 2s:10s or :500ms")
    window = (parse_duration(lo) if lo else 0.0, parse_duration(hi) if hi else float("inf"))
    if window[1] <= window[0]:
        raise BadValue(f"--window: {text!r} ends before it starts")
    return window


def ranks_text(ranks: list[int]) -> str:
    """A list of ranks (or any integers) as runs: ``0-169 (170 ranks)``, ``0, 2, 4-7 (6 ranks)``."""
    runs: list[list[int]] = []
    for r in sorted(set(ranks)):
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    text = ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)
    return f"{text} ({len(set(ranks))} rank{'s' if len(set(ranks)) != 1 else ''})" if ranks else "none"


def ranks_phrase(ranks: list[int]) -> str:
    """``rank 5``, or ``ranks 0, 2 (2 ranks)``: ranks to name in a sentence."""
    return f"rank {ranks[0]}" if len(set(ranks)) == 1 else f"ranks {ranks_text(ranks)}"


def plural(n: int, what: str) -> str:
    """``n what`` with an s unless ``n`` is 1: "1 error", "2 errors"."""
    return f"{n} {what}" + ("" if n == 1 else "s")
