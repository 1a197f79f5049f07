"""The file system's configuration file (the ``fs.conf``/``pvfs2tab`` of this system).

One JSON file names every server (address, roles, storage, clock) and the run
parameters the servers and the client wrappers share.  ``callid run`` writes it;
servers and ``callid.launch`` read it (``CALLID_CONFIG`` names it).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

CONFIG_ENV = "CALLID_CONFIG"
ROLE_META = "meta"
ROLE_IO = "io"


@dataclass
class ServerConfig:
    """One server process."""

    name: str
    roles: list[str]
    storage: str
    host: str = "127.0.0.1"
    port: int = 0  # 0: not started yet


@dataclass
class Config:
    """Everything the servers and the client wrappers of one run share."""

    run_id: str
    servers: list[ServerConfig]
    trace_dir: str  # where every rank and server writes its log parts
    callid_layout: str  # TOTAL/RANK bits of the CallID (callid.ids.Layout)
    mount: list[str] = field(default_factory=lambda: ["/pvfs2"])
    callid: bool = True  # False: trace but do not stamp or propagate CallIDs
    strip_size: int = 65536
    flow_buffer: int = 65536
    small_io: int = 16384  # 0 disables small I/O
    flush_rows: int = 4096
    ranks_per_host: int = 0  # simulated hosts: ranks [h*n, (h+1)*n) share host h; 0: one host
    clock_skew: dict[str, dict] = field(default_factory=dict)  # domain -> server_sim.clock.Skew
    clock_t0: int = 0  # ns, machine clock: the time from which injected drifts accumulate
    # Only for measuring what logging costs (bench/), not a user feature: False logs nothing.
    client_events: bool = True
    server_events: bool = True

    @property
    def meta_server(self) -> ServerConfig:
        return next(s for s in self.servers if ROLE_META in s.roles)

    @property
    def io_servers(self) -> list[ServerConfig]:
        return [s for s in self.servers if ROLE_IO in s.roles]

    def server(self, name: str) -> ServerConfig:
        for s in self.servers:
            if s.name == name:
                return s
        raise KeyError(f"no server named {name!r} in the configuration")

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write atomically (temporary name, then rename)."""
        tmp = Path(str(path) + ".tmp")
        tmp.write_text(self.to_json())
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Config:
        data = json.loads(Path(path).read_text())
        data["servers"] = [ServerConfig(**s) for s in data["servers"]]
        return cls(**data)
