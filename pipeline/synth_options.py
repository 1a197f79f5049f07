"""The parameters of a synthetic trace and their defaults (light: the CLI shows them in its help)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SynthOptions"]


@dataclass
class SynthOptions:
    """Parameters of a synthetic trace."""

    ranks: int = 4
    servers: int = 2
    calls: int = 1000
    fanout: int = 10
    collective_share: float = 0.1
    unattributed_share: float = 0.01
    unstamped_share: float = 0.01
    skew: str = ""  # callid_core.clock specification, e.g. server:0=+250ms@15ppm~1ppm
    duration: float = 0.0  # ns from first call to last; 0: calls follow each other closely
    async_share: float = 0.0  # share of Trove writes that end after their response (write-back)
    misjoined: int = 0  # requests logged with another call's CallID
    ranks_per_host: int = 0  # 0: every rank on one host
    latency: float = 5_000.0  # ns: least one-way network latency
    jitter: float = 10_000.0  # ns: mean of the exponential part of the latency
    seed: int = 0
