"""Command-line options for MPI example programs (imported by ior.py and macsio.py, next to them)."""

from __future__ import annotations

import argparse
import sys
from typing import IO, NoReturn

from mpi4py import MPI

from callid_core.units import parse_size


class Parser(argparse.ArgumentParser):
    """argparse that prints from rank 0 only and reports a bad option in one line (exit status 2)."""

    def _print_message(self, message: str, file: IO[str] | None = None) -> None:
        if MPI.COMM_WORLD.Get_rank() == 0:
            super()._print_message(message, file)

    def error(self, message: str) -> NoReturn:
        if MPI.COMM_WORLD.Get_rank() == 0:
            print(f"{self.prog}: error: {message}", file=sys.stderr, flush=True)
        MPI.COMM_WORLD.Barrier()  # every rank fails the same way: let rank 0 print before any rank exits
        raise SystemExit(2)


def size_arg(text: str) -> int:
    """A byte count: 1048576, 256k, 1m, 1g, 1MiB (callid_core.units.parse_size)."""
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
