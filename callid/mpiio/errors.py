"""The MPI error a call on the simulated file system raises."""

from __future__ import annotations

from mpi4py import MPI

__all__ = ["SimIOError"]


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
