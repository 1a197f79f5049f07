"""The simulated file system's devices: a disk and a network link per server, and faults planted in them.

By default a server's disk is the real file under its storage directory and its link the real socket,
as fast as they are: no model.  ``--disk-model latency=5ms,bandwidth=200MiB/s,queue=4`` makes every
server's disk one that serves at most ``queue`` operations at once, each taking ``latency + bytes /
bandwidth`` (or the real operation's own time, if longer), so the disk operations' times are the
model's.  ``--net-model latency=50us,bandwidth=1GiB/s`` makes every server's link (each direction,
full duplex) carry one message at a time, each taking ``latency + bytes / bandwidth``.  Faults
(``--fault``, repeatable) make one server's devices, or one rank, misbehave:

- ``io1:disk=slow:20x``: its disk operations take 20 times as long (the model's time, or the real one's);
- ``io1:link=slow:20x``: its messages take 20 times as long on its link (the net model's time, or
  :data:`NOMINAL_LINK`'s when there is none);
- ``meta0:load=20x``: its metadata operations (the keyval store) take 20 times as long;
- ``io0:pause=2s@1s``: it serves no request for 2 s from 1 s after its first (as a server stalled);
- ``io1:full=16MiB``: its writes fail with ENOSPC once it has written 16 MiB (a full server);
- ``rank3:straggle=50ms``: rank 3 comes 50 ms late to each of its MPI-IO calls (a rank slowed by
  its node or its computation: the others wait for it in collectives).

A run records them in its configuration (the truth a diagnosis is scored against); no analysis reads
them.  :class:`DeviceModel` is the arithmetic; ``server_sim.devices`` applies it to the servers, the
clients (``callid.mpiio``, the ROMIO wrapper, the replay) delay a straggling rank.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from callid_core.errors import BadValue
from callid_core.units import parse_duration, parse_size

__all__ = ["NOMINAL_LINK", "DeviceModel", "Fault", "FaultError", "faults_from_json", "faults_to_json",
           "model_from_json", "parse_faults", "parse_model", "straggles"]

#: at most this much slower (a factor): beyond, a run would only time out
MAX_FACTOR = 1000.0
MAX_QUEUE = 1024
MAX_STRAGGLE_S = 60.0


class FaultError(BadValue):
    """A bad --disk-model, --net-model or --fault."""


@dataclass(frozen=True)
class DeviceModel:
    """A disk or link that serves at most ``queue`` operations (messages) at once, each for
    :meth:`service` seconds."""

    latency_s: float = 0.0
    bandwidth: float = 0.0  # bytes per second; 0: unbounded
    queue: int = 1

    def service(self, nbytes: int) -> float:
        """Seconds one operation of ``nbytes`` occupies the device."""
        return self.latency_s + (nbytes / self.bandwidth if self.bandwidth else 0.0)


#: the link a ``link=slow`` fault slows when the run has no --net-model (a 10 Gb/s-class link)
NOMINAL_LINK = DeviceModel(latency_s=50e-6, bandwidth=float(1 << 30))


@dataclass
class Fault:
    """What is planted in one server, or one rank (factors 1: nothing)."""

    disk_factor: float = 1.0
    meta_factor: float = 1.0
    link_factor: float = 1.0
    pause: tuple[float, float] | None = None  # (start, length) in s from the server's start
    full_bytes: int | None = None  # writes fail with ENOSPC beyond this many bytes written
    straggle_s: float = 0.0  # (a rank) how late it comes to each of its MPI-IO calls
    said: list[str] = field(default_factory=list)  # the specifications, as given


def parse_model(spec: str, what: str = "disk") -> DeviceModel | None:
    """``latency=5ms,bandwidth=200MiB/s,queue=4`` (any of them; the others 0, unbounded, 1); '' -> None.
    ``what``: the device, as errors name it."""
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
            raise FaultError(f"bad {what} model {item!r} ({exc}): expected e.g. "
                             "latency=5ms,bandwidth=200MiB/s,queue=4") from None
    model = DeviceModel(**values)  # type: ignore[arg-type]
    if model.latency_s < 0 or model.bandwidth < 0 or not 1 <= model.queue <= MAX_QUEUE:
        raise FaultError(f"bad {what} model {spec!r}: latency and bandwidth at least 0, "
                         f"queue 1 to {MAX_QUEUE}")
    return model


_FAULT = re.compile(r"^(?P<server>[A-Za-z0-9_.-]+):"
                    r"(?P<what>disk|link|load|pause|full|straggle)=(?P<value>\S+)$")
_RANK = re.compile(r"^rank(?P<rank>[0-9]+)$")


def parse_faults(specs: list[str], servers: list[str] | None = None,
                 ranks: int | None = None) -> dict[str, Fault]:
    """``["io1:disk=slow:20x", "io0:pause=2s@1s", "rank3:straggle=50ms", ...]`` -> ``{server or rankN:
    Fault}``; the server names checked against ``servers``, the ranks against ``ranks``, if given."""
    out: dict[str, Fault] = {}
    for spec in specs:
        m = _FAULT.match(spec.strip())
        if not m:
            raise FaultError(f"bad fault {spec!r}: expected SERVER:disk=slow:20x, SERVER:link=slow:20x, "
                             "SERVER:load=20x, SERVER:pause=2s@1s, SERVER:full=16MiB or rankN:straggle=50ms")
        server, what, value = m["server"], m["what"], m["value"]
        rank = _RANK.match(server)
        if (what == "straggle") != bool(rank):
            raise FaultError(f"fault {spec!r}: a rank (rankN) straggles, a server has the other faults")
        if rank and ranks is not None and int(rank["rank"]) >= ranks:
            raise FaultError(f"fault {spec!r}: no rank {rank['rank']} (ranks 0 to {ranks - 1})")
        if not rank and servers is not None and server not in servers:
            raise FaultError(f"fault {spec!r}: no server {server!r} (servers: {', '.join(servers)})")
        fault = out.setdefault(server, Fault())
        try:
            _plant(fault, what, value)
        except (ValueError, BadValue) as exc:
            raise FaultError(f"bad fault {spec!r}: {exc}") from None
        fault.said.append(spec.strip())
    return out


def _plant(fault: Fault, what: str, value: str) -> None:
    if what in ("disk", "link", "load"):
        factor = _factor(value if what == "load" else value.removeprefix("slow:"))
        setattr(fault, {"disk": "disk_factor", "link": "link_factor", "load": "meta_factor"}[what], factor)
    elif what == "straggle":
        fault.straggle_s = parse_duration(value) / 1e9
        if not 0 < fault.straggle_s <= MAX_STRAGGLE_S:
            raise ValueError(f"a rank straggles by more than 0 s and at most {MAX_STRAGGLE_S:g} s")
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


def model_from_json(data: dict | None) -> DeviceModel | None:
    return DeviceModel(**data) if data else None


def faults_to_json(faults: dict[str, Fault]) -> dict[str, dict]:
    return {server: asdict(f) for server, f in faults.items()}


def faults_from_json(data: dict[str, dict] | None) -> dict[str, Fault]:
    return {server: Fault(**{**f, "pause": tuple(f["pause"]) if f.get("pause") else None})
            for server, f in (data or {}).items()}


def straggles(faults: dict[str, Fault]) -> dict[int, float]:
    """{rank: seconds late to each of its MPI-IO calls} of the straggling ranks."""
    return {int(m["rank"]): f.straggle_s for name, f in faults.items() if (m := _RANK.match(name))}
