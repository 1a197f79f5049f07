"""Clock domains with an injected offset and drift (``--clock-skew``).

On one machine every process reads the same clock.  To exercise clock
alignment as a cluster would, each clock domain (a simulated host, whose ranks
share it, or a server) reads ``T + offset + drift * (T - t0)`` (plus, in
synthetic traces only, a slow sinusoidal wander of the drift), where ``T`` is the
machine's clock and ``t0`` the run's start.  The parameters are the truth that
the analysis estimates; they are stored in the run configuration.

A skew specification is a comma-separated list of ``DOMAIN=OFFSET[@DRIFT][~WANDER]``:
``server:0=+40ms@30ppm,host:1=-3ms@-12ppm``.  ``server:N`` is the N-th I/O
server (``ioN``), ``server:NAME`` any server by name, ``host:N`` simulated host N
(rank 0's host, ``host:0``, is the reference clock of the analysis).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from callid_core.errors import BadValue
from callid_core.units import TIME_UNITS_NS

__all__ = [
    "Skew", "SkewError", "now", "parse_skew", "skewed_clock", "skews_from_json", "skews_to_json",
    "use_domain",
]

_ITEM = re.compile(
    r"^(?P<kind>server|host):(?P<which>[A-Za-z0-9_]+)="
    r"(?P<off>[+-]?\d+(?:\.\d+)?)(?P<unit>ns|us|µs|ms|s)"
    r"(?:@(?P<drift>[+-]?\d+(?:\.\d+)?)ppm)?"
    r"(?:~(?P<wander>\d+(?:\.\d+)?)ppm)?$"
)


class SkewError(BadValue):
    """A malformed skew specification; the message names the offending item."""


@dataclass(frozen=True)
class Skew:
    """How one clock domain deviates from the machine clock."""

    offset_ns: float = 0.0
    drift_ppm: float = 0.0
    wander_ppm: float = 0.0  # amplitude of a sinusoidal drift change over ``period_ns``
    period_ns: float = 3600e9

    def delta(self, dt):
        """The domain's clock minus the machine clock, ``dt`` ns after ``t0`` (floats or arrays)."""
        out = self.offset_ns + self.drift_ppm * 1e-6 * dt
        if self.wander_ppm:
            w = 2 * math.pi / self.period_ns
            out = out + self.wander_ppm * 1e-6 / w * np.sin(w * dt)
        return out

    def local(self, t, t0: int):
        """The domain's reading (int ns) when the machine clock reads ``t`` (int or int64 array)."""
        return t + np.rint(self.delta(t - t0)).astype(np.int64)


def domain_name(kind: str, which: str, io_servers: list[str] | None = None) -> str:
    """The clock-domain name of ``server:N``/``server:NAME``/``host:N``."""
    if kind == "host":
        if not which.isdigit():
            raise SkewError(f"host:{which}: a host is given by its number")
        return f"host{int(which)}"
    if which.isdigit():
        name = f"io{int(which)}"
        if io_servers is not None and name not in io_servers:
            raise SkewError(f"server:{which}: there are {len(io_servers)} I/O servers (io0..)")
        return name
    return which


#: the largest clock offset and drift a skew may give (a clock without NTP for a day; a bad crystal)
MAX_OFFSET_NS = 24 * 3_600_000_000_000
MAX_DRIFT_PPM = 1000


def parse_skew(spec: str, servers: list[str] | None = None, io_servers: list[str] | None = None,
               hosts: int | None = None) -> dict[str, Skew]:
    """Parse a skew specification into ``{domain: Skew}``; check the names if given."""
    out: dict[str, Skew] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        m = _ITEM.match(item)
        if not m:
            raise SkewError(f"bad clock skew {item!r}: expected e.g. server:0=+40ms@30ppm or host:1=-3ms")
        name = domain_name(m["kind"], m["which"], io_servers)
        if m["kind"] == "server" and servers is not None and name not in servers:
            raise SkewError(f"{item}: no server {name!r} (servers: {', '.join(servers)})")
        if m["kind"] == "host" and hosts is not None and int(m["which"]) >= hosts:
            raise SkewError(f"{item}: no host {m['which']}: the ranks are on {hosts} host(s), "
                           "host:0.. (--ranks-per-host groups them)")
        if name in out:
            raise SkewError(f"{item}: clock {name} is given twice")
        skew = Skew(float(m["off"]) * TIME_UNITS_NS[m["unit"]], float(m["drift"] or 0),
                    float(m["wander"] or 0))
        if abs(skew.offset_ns) > MAX_OFFSET_NS or abs(skew.drift_ppm) > MAX_DRIFT_PPM \
                or abs(skew.wander_ppm) > MAX_DRIFT_PPM:
            raise SkewError(f"{item}: a clock is off by at most {MAX_OFFSET_NS // 3_600_000_000_000} h "
                            f"and drifts by at most {MAX_DRIFT_PPM} ppm")
        out[name] = skew
    return out


def skews_to_json(skews: dict[str, Skew]) -> dict[str, dict]:
    return {name: asdict(s) for name, s in skews.items()}


def skews_from_json(data: dict[str, dict] | None) -> dict[str, Skew]:
    return {name: Skew(**s) for name, s in (data or {}).items()}


def skewed_clock(skew: Skew | None, t0: int) -> Callable[[], int]:
    """A ``time.time_ns`` replacement reading the domain's clock (``time.time_ns`` itself if unskewed)."""
    if skew is None or skew == Skew():
        return time.time_ns

    def now() -> int:
        t = time.time_ns()
        return t + int(skew.delta(t - t0))

    return now


_now = time.time_ns


def now() -> int:
    """This process's clock (ns): its domain's, once :func:`use_domain` has set it."""
    return _now()


def use_domain(clock_skew: dict[str, dict] | None, t0: int, domain: str) -> None:
    """Make :func:`now` read clock domain ``domain`` of a run's ``clock_skew`` configuration."""
    global _now
    _now = skewed_clock(skews_from_json(clock_skew).get(domain), t0)
