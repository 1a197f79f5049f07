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

from callid_core.atomic import replacing
from callid_core.errors import InputError
from callid_core.ids import DEFAULT_LAYOUT

#: environment variable naming the configuration file (read by ``callid.launch``)
CONFIG_ENV = "CALLID_CONFIG"
ROLE_META = "meta"
ROLE_IO = "io"

# The defaults of a file system, in one place (``callid run``, the CLI and the servers read them).
#: simple_stripe strip size in bytes (PVFS2's default)
DEFAULT_STRIP_SIZE = 65536
#: bytes per flow buffer (PVFS2's default is 256 KiB; 64 KiB shows more of a flow)
DEFAULT_FLOW_BUFFER = 65536
#: largest share of one access per server that travels inside the request (0: no small I/O)
DEFAULT_SMALL_IO = 16384
#: path prefix under which files live on the simulated file system
DEFAULT_MOUNT = "/pvfs2"
#: rows a log holds before it writes a part file (what a killed process can lose at most)
DEFAULT_FLUSH_ROWS = 4096
#: I/O servers of a run (plus one metadata server)
DEFAULT_IO_SERVERS = 2
#: MPI ranks of a run
DEFAULT_RANKS = 2
#: bytes an aggregator of two-phase collective buffering accesses per cycle (the hint ``cb_buffer_size``)
DEFAULT_CB_BUFFER_SIZE = 16 * 1024 * 1024


def host_of(world_rank: int, ranks_per_host: int) -> int:
    """The simulated host of a rank: ranks ``[h*n, (h+1)*n)`` share host ``h`` (0 per host: all on 0)."""
    return world_rank // ranks_per_host if ranks_per_host > 0 else 0


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
    callid_layout: str = str(DEFAULT_LAYOUT)  # TOTAL/RANK bits of the CallID (callid_core.ids.Layout)
    mount: list[str] = field(default_factory=lambda: [DEFAULT_MOUNT])
    callid: bool = True  # False: trace but do not stamp or propagate CallIDs
    strip_size: int = DEFAULT_STRIP_SIZE
    flow_buffer: int = DEFAULT_FLOW_BUFFER
    small_io: int = DEFAULT_SMALL_IO  # 0 disables small I/O
    flush_rows: int = DEFAULT_FLUSH_ROWS
    ranks_per_host: int = 0  # simulated hosts: ranks [h*n, (h+1)*n) share host h; 0: one host
    clock_skew: dict[str, dict] = field(default_factory=dict)  # domain -> callid_core.clock.Skew
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
        raise InputError(f"no server named {name!r} in the configuration")

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write atomically (temporary name, then rename)."""
        with replacing(path) as tmp:
            tmp.write_text(self.to_json())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Config:
        """Read a configuration; a file that is not one raises :class:`InputError`."""
        try:
            data = json.loads(Path(path).read_text())
            data["servers"] = [ServerConfig(**s) for s in data["servers"]]
            return cls(**data)
        except OSError as exc:
            raise InputError(f"{path}: cannot read the file system configuration ({exc.strerror})") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(f"{path}: not a callid file system configuration ({exc})") from None
