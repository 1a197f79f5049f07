"""``python -m callid.launch (SCRIPT | -m MODULE) [ARGS...]``: run an mpi4py program traced.

Installs the traced ``MPI.File`` before the program runs, so unmodified
programs are traced.  Works under any MPI launcher.  The file system and the
trace directory come from the configuration named by ``CALLID_CONFIG``; without
it every file goes to the real MPI-IO and the trace goes to ``CALLID_TRACE_DIR``
(default ``./callid-trace``).  A rank that fails writes ``rank-N.failed`` in the
trace directory and aborts ``MPI_COMM_WORLD`` so the other ranks do not hang.
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from pathlib import Path

from callid_core.config import CONFIG_ENV, Config

USAGE = "usage: python -m callid.launch (SCRIPT | -m MODULE) [ARGS...]"


def _parse(argv: list[str]) -> tuple[str, str, list[str]]:
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip() + "\n\n" + USAGE, file=sys.stderr)
        raise SystemExit(0 if argv else 2)
    if argv[0] == "-m":
        if len(argv) < 2:
            print(USAGE, file=sys.stderr)
            raise SystemExit(2)
        return "module", argv[1], argv[2:]
    return "script", argv[0], argv[1:]


def main(argv: list[str] | None = None) -> int:
    kind, target, args = _parse(sys.argv[1:] if argv is None else argv)
    from mpi4py import MPI

    from callid.mpiio import file as traced

    rank = MPI.COMM_WORLD.Get_rank()
    config_path = os.environ.get(CONFIG_ENV)
    config = Config.load(config_path) if config_path else None
    trace_dir = config.trace_dir if config else os.environ.get("CALLID_TRACE_DIR", "callid-trace")
    tracer = traced.Tracer(rank, trace_dir, config)
    traced.install(tracer)
    code = 0
    try:
        if kind == "module":
            sys.argv = [target, *args]
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.argv = [target, *args]
            sys.path.insert(0, str(Path(target).resolve().parent))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as exc:
        code = int(exc.code) if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if code:
            _fail(trace_dir, rank, f"exited with status {code}")
    except BaseException as exc:  # a failing rank stops the job (as mpi4py.run does)
        traceback.print_exc()
        _fail(trace_dir, rank, f"{type(exc).__name__}: {exc}")
        code = 1
    finally:
        traced.uninstall()
    if code:
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(code)
    return code


def _fail(trace_dir: str, rank: int, message: str) -> None:
    path = Path(trace_dir) / f"rank-{rank}.failed"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(message.splitlines()[0] if message else "failed")
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main())
