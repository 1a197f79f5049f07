"""Byte sizes written as ``65536``, ``64KiB``, ``1MiB``; durations written as ``250ms``, ``1h``; rank
ranges written as ``0-63,100``; time windows written as ``2s:10s``."""

from __future__ import annotations

import re

from callid_core.errors import BadValue

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}
_SIZE = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str | int) -> int:
    """Parse a byte size; binary units (KiB = 1024).  Raise :class:`BadValue` with the reason."""
    if isinstance(text, int):
        return text
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else None
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


def parse_ranks(text: str) -> set[int]:
    """``0-63,100`` -> the ranks; raise :class:`BadValue`."""
    out: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi or lo)
        except ValueError:
            raise BadValue(f"--ranks: {part!r} is not a rank or a range like 0-63") from None
        if a < 0 or b < a:
            raise BadValue(f"--ranks: {part!r} is not a range of ranks")
        out.update(range(a, b + 1))
    if not out:
        raise BadValue("--ranks: no ranks given")
    return out


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
