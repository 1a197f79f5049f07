"""The MPI error a call on the simulated file system raises, and how a failed call's error is logged."""

from __future__ import annotations

import functools

from mpi4py import MPI

__all__ = ["SimIOError", "error_text"]


class SimIOError(MPI.Exception):
    """``MPI.Exception`` (an error class of the standard) that also says what the file system answered."""

    def __init__(self, error_class: int, detail: str, fs_failed: bool = False) -> None:
        super().__init__(error_class)
        self.detail = detail
        #: the file system failed, not the call: a server could not be reached or its connection broke,
        #: or its disk is full
        self.fs_failed = fs_failed

    def __str__(self) -> str:
        return f"{super().__str__()}: {self.detail}"


@functools.cache
def _class_names() -> dict[int, str]:
    """The MPI standard's error classes by value, as the MPI library in use numbers them."""
    names: dict[int, str] = {}
    for name in sorted(dir(MPI)):
        if name.startswith("ERR_") and name != "ERR_LASTCODE":
            names.setdefault(getattr(MPI, name), f"MPI_{name}")
    return names


def error_text(exc: BaseException) -> str:
    """What a failed call's ``error`` column says: an MPI error's class name first (``MPI_ERR_ARG:
    Invalid argument``), as ``callid check`` E601 reports it; any other exception's type and message."""
    if isinstance(exc, MPI.Exception):
        cls = exc.Get_error_class()
        return f"{_class_names().get(cls, f'MPI error class {cls}')}: {str(exc).strip()}"
    return f"{type(exc).__name__}: {exc}"
