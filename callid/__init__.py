"""callid: which disk operations, on which storage server, did this MPI-IO call cause, and when?

The Python API (:mod:`callid.api`): ``callid.open(path)``, ``callid.stats``, ``callid.insights``, ... are
imported on first use, so that a traced rank importing ``callid.mpiio`` loads none of the analysis.
(``callid.run`` and ``callid.replay`` are the modules of those commands: their functions are
``callid.api.run`` and ``callid.api.replay``.)
"""

from __future__ import annotations

__all__ = ["CheckResults", "Merged", "Selection", "check", "export", "insights", "merge", "merge_warnings",
           "open", "opened", "report", "selection", "stats", "view", "why"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from callid import api

        return getattr(api, name)
    raise AttributeError(f"module 'callid' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
