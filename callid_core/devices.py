"""The simulated file system's devices: a disk model per server, and faults planted in them.

By default a server's disk is the real file under its storage directory, as fast as it is: no
model.  ``--disk-model latency=5ms,bandwidth=200MiB/s,queue=4`` makes every server's disk one that
serves at most ``queue`` operations at once, each taking ``latency + bytes / bandwidth`` (or the
real operation's own time, if longer), so the disk operations' times are the model's.  Faults
(``--fault``, repeatable) make one server's devices misbehave:

- ``io1:disk=slow:20x``: its disk operations take 20 times as long (the model's time, or the real one's);
- ``meta0:load=20x``: its metadata operations (the keyval store) take 20 times as long;
- ``io0:pause=2s@1s``: it serves no request for 2 s from 1 s after its first (as a server stalled);
- ``io1:full=16MiB``: its writes fail with ENOSPC once it has written 16 MiB (a full server).

A run records them in its configuration (the truth a diagnosis is scored against); no analysis reads
them.  :class:`DiskModel` is the arithmetic; ``server_sim.devices`` applies it.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from callid_core.errors import BadValue
from callid_core.units import parse_duration, parse_size

__all__ = ["DiskModel", "Fault", "FaultError", "disk_model_from_json", "faults_from_json", "faults_to_json",
           "parse_disk_model", "parse_faults"]

#: at most this much slower (a factor): beyond, a run would only time out
MAX_FACTOR = 1000.0
MAX_QUEUE = 1024


class FaultError(BadValue):
    """A bad --disk-model or --fault."""


@dataclass(frozen=True)
class DiskModel:
    """A disk that serves at most ``queue`` operations at once, each for :meth:`service` seconds."""

    latency_s: float = 0.0
    bandwidth: float = 0.0  # bytes per second; 0: unbounded
    queue: int = 1

    def service(self, nbytes: int) -> float:
        """Seconds one operation of ``nbytes`` occupies the disk."""
        return self.latency_s + (nbytes / self.bandwidth if self.bandwidth else 0.0)


@dataclass
class Fault:
    """What is planted in one server (factors 1: nothing)."""

    disk_factor: float = 1.0
    meta_factor: float = 1.0
    pause: tuple[float, float] | None = None  # (start, length) in s from the server's start
    full_bytes: int | None = None  # writes fail with ENOSPC beyond this many bytes written
    said: list[str] = field(default_factory=list)  # the specifications, as given


def parse_disk_model(spec: str) -> DiskModel | None:
    """``latency=5ms,bandwidth=200MiB/s,queue=4`` (any of them; the others 0, unbounded, 1); '' -> None."""
    if not spec.strip():
        return None
    values: dict[str, float | int] = {}
    for item in (s.strip() for s in spec.split(",")):
        key, _, value = item.partition("=")
        try:
            if key == "latency":
                values["latency_s"] = parse_duration(value) / 1e9
            elif key == "bandwidth":
                values["bandwidth"] = float(parse_size(value.removesuffix("/s")))
            elif key == "queue":
                values["queue"] = int(value)
            else:
                raise ValueError(f"unknown key {key!r}")
        except (ValueError, BadValue) as exc:
            raise FaultError(f"bad disk model {item!r} ({exc}): expected e.g. "
                             "latency=5ms,bandwidth=200MiB/s,queue=4") from None
    model = DiskModel(**values)  # type: ignore[arg-type]
    if model.latency_s < 0 or model.bandwidth < 0 or not 1 <= model.queue <= MAX_QUEUE:
        raise FaultError(f"bad disk model {spec!r}: latency and bandwidth at least 0, queue 1 to {MAX_QUEUE}")
    return model


_FAULT = re.compile(r"^(?P<server>[A-Za-z0-9_.-]+):(?P<what>disk|load|pause|full)=(?P<value>\S+)$")


def parse_faults(specs: list[str], servers: list[str] | None = None) -> dict[str, Fault]:
    """``["io1:disk=slow:20x", "io0:pause=2s@1s", ...]`` -> ``{server: Fault}``; the server names
    checked against ``servers`` if given."""
    out: dict[str, Fault] = {}
    for spec in specs:
        m = _FAULT.match(spec.strip())
        if not m:
            raise FaultError(f"bad fault {spec!r}: expected SERVER:disk=slow:20x, SERVER:load=20x, "
                             "SERVER:pause=2s@1s or SERVER:full=16MiB")
        server, what, value = m["server"], m["what"], m["value"]
        if servers is not None and server not in servers:
            raise FaultError(f"fault {spec!r}: no server {server!r} (servers: {', '.join(servers)})")
        fault = out.setdefault(server, Fault())
        try:
            _plant(fault, what, value)
        except (ValueError, BadValue) as exc:
            raise FaultError(f"bad fault {spec!r}: {exc}") from None
        fault.said.append(spec.strip())
    return out


def _plant(fault: Fault, what: str, value: str) -> None:
    if what in ("disk", "load"):
        factor = _factor(value.removeprefix("slow:") if what == "disk" else value)
        if what == "disk":
            fault.disk_factor = factor
        else:
            fault.meta_factor = factor
    elif what == "pause":
        length, _, start = value.partition("@")
        fault.pause = (parse_duration(start or "0s") / 1e9, parse_duration(length) / 1e9)
        if fault.pause[1] <= 0:
            raise ValueError("a pause lasts more than 0 s")
    else:
        fault.full_bytes = parse_size(value)


def _factor(text: str) -> float:
    """``20x`` -> 20.0, within 1 .. MAX_FACTOR."""
    if not text.endswith("x"):
        raise ValueError(f"{text!r}: a factor, e.g. 20x")
    factor = float(text[:-1])
    if not 1.0 <= factor <= MAX_FACTOR:
        raise ValueError(f"a factor from 1x to {MAX_FACTOR:g}x")
    return factor


def disk_model_from_json(data: dict | None) -> DiskModel | None:
    return DiskModel(**data) if data else None


def faults_to_json(faults: dict[str, Fault]) -> dict[str, dict]:
    return {server: asdict(f) for server, f in faults.items()}


def faults_from_json(data: dict[str, dict] | None) -> dict[str, Fault]:
    return {server: Fault(**{**f, "pause": tuple(f["pause"]) if f.get("pause") else None})
            for server, f in (data or {}).items()}
