"""``python -m callid.launch (SCRIPT | -m MODULE) [ARGS...]``: run an mpi4py program traced.

Installs the traced ``MPI.File`` before the program runs, so unmodified
programs are traced.  Works under any MPI launcher.  The file system and the
trace directory come from the configuration named by ``CALLID_CONFIG``; without
it every file goes to the real MPI-IO and the trace goes to ``CALLID_TRACE_DIR``
(default ``./callid-trace``).

A rank that fails writes ``rank-N.failed`` in the trace directory (for an OSError, e.g. a full
disk, its traceback goes to ``rank-N.traceback``, not to the terminal) and aborts
``MPI_COMM_WORLD`` so the other ranks do not hang.  Under ``callid run`` (which
sets ``CALLID_NO_ABORT`` and starts ``mpiexec -disable-auto-cleanup``) it exits
instead, and the launcher tells the other ranks with SIGUSR1.  SIGTERM, SIGINT,
SIGHUP and SIGUSR1 make a rank flush its log, write ``rank-N.stopped`` and exit
with 128 + the signal's number; they are handled by a thread, so a rank blocked
inside an MPI call is stopped too.  While a rank runs, ``rank-N.running`` holds
its process id: one left behind names a rank that was killed or crashed.
"""

from __future__ import annotations

import ctypes
import os
import runpy
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from callid_core.config import CONFIG_ENV, Config
from callid_core.errors import CallidError

USAGE = "usage: python -m callid.launch (SCRIPT | -m MODULE) [ARGS...]"
#: set (to 1) by ``callid run``: a failing rank exits instead of calling ``MPI_Abort``, which would
#: kill the other ranks before they flush their logs
NO_ABORT_ENV = "CALLID_NO_ABORT"
#: the signals that stop a rank with its log flushed (SIGUSR1: MPICH's launcher says a peer ended)
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1})


class RankState:
    """What the signal thread needs to stop this rank cleanly (filled in once MPI is up)."""

    trace_dir: str | None = None
    rank: int = -1
    flush: Callable[[], None] | None = None  # flushes the rank's log
    keeper: int | None = None  # the process mpiexec started, which waits for this one (_keep_rank)


def watch_signals() -> RankState:
    """Call before MPI starts its threads (they inherit the mask, so only the signal thread takes
    the stop signals): block them, start the thread that handles them.  Under ``callid run`` the
    rank first gets a keeper (``_keep_rank``)."""
    keeper = _keep_rank() if os.environ.get(NO_ABORT_ENV) else None
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    state = RankState()
    state.keeper = keeper
    threading.Thread(target=_stop_on_signal, args=(state,), name="callid-signals", daemon=True).start()
    return state


def _keep_rank() -> int:
    """Fork: the child goes on to be the rank; the parent (the process mpiexec started) waits for it
    and exits with its status, or 128 + the signal that killed it, after marking it
    ``rank-N.failed``.  MPICH's launcher SIGKILLs every rank at once when one of its processes dies
    of a signal, before the others can flush; for an exit it sends them SIGUSR1.  The rank gets
    SIGTERM if its keeper dies (it stops, and says why).  Returns the keeper's process id (in the rank)."""
    keeper = os.getpid()
    pid = os.fork()
    if pid == 0:
        die_with_parent()
        if os.getppid() != keeper:  # (it died before that)
            os.kill(os.getpid(), signal.SIGTERM)
        return keeper
    for sig in STOP_SIGNALS:  # (sent to the whole process group: they are the rank's to handle)
        signal.signal(sig, signal.SIG_IGN)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if code < 0:
        config_path, rank = os.environ.get(CONFIG_ENV), os.environ.get("PMI_RANK", "")
        if config_path and rank.isdigit():
            trace_dir = Config.load(config_path).trace_dir
            running = marker(trace_dir, int(rank), "running")
            if running.exists():
                write_marker(trace_dir, int(rank), "failed", f"killed by {signal.Signals(-code).name}")
                running.unlink(missing_ok=True)
        code = 128 - code
    os._exit(code)


def end_job(comm, code: int) -> None:
    """A rank that failed (``code`` != 0) ends the job: it exits under ``callid run`` (the launcher
    tells the others), else calls ``MPI_Abort`` so the others do not hang."""
    sys.stderr.flush()
    if os.environ.get(NO_ABORT_ENV):
        os._exit(code)
    comm.Abort(code)


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


def marker(trace_dir: str | os.PathLike[str], rank: int, what: str) -> Path:
    """``rank-N.WHAT`` in the trace directory: ``running``, ``failed`` or ``stopped``."""
    return Path(trace_dir) / f"rank-{rank}.{what}"


def write_marker(trace_dir: str | None, rank: int, what: str, text: str) -> None:
    """Write ``rank-N.WHAT`` (the first line of ``text``).  On a full disk the rank's ``running``
    marker, whose block is there already, takes the text and the name."""
    if trace_dir is None:
        return
    path = marker(trace_dir, rank, what)
    line = (text.splitlines()[0] if text else what).encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(line)
    except OSError:
        try:
            with open(marker(trace_dir, rank, "running"), "r+b") as f:
                f.write(line[:MARKER_BYTES])
                f.truncate()
            os.replace(f.name, path)
        except OSError:
            pass


#: most bytes of a marker written in the block of the ``running`` marker (its first block, on any disk)
MARKER_BYTES = 512


def fail_rank(trace_dir: str | None, rank: int, exc: BaseException, who: str = "") -> None:
    """Say why a rank failed in one line, ``rank-N.failed`` (``callid run`` prints it, prefixed by
    ``who``); its traceback goes to ``rank-N.traceback`` beside it, never to the terminal."""
    if trace_dir is None:  # (no run to tell)
        traceback.print_exception(exc)
        return
    try:
        marker(trace_dir, rank, "traceback").write_text("".join(traceback.format_exception(exc)))
    except OSError:
        pass
    write_marker(trace_dir, rank, "failed", f"{who}{type(exc).__name__}: {exc}")


def _stop_on_signal(state: RankState) -> None:
    """The signal thread: wait for a stop signal, flush the log, exit."""
    sig = signal.sigwait(STOP_SIGNALS)
    name = signal.Signals(sig).name
    orphan = state.keeper is not None and os.getppid() != state.keeper  # (die_with_parent's SIGTERM)
    if orphan:
        write_marker(state.trace_dir, state.rank, "failed", f"its process {state.keeper}, the one mpiexec "
                     "started, died (killed?): the rank stopped, flushing its log")
    else:
        write_marker(state.trace_dir, state.rank, "stopped", name)
    try:
        if state.flush is not None:
            state.flush()
    finally:
        if state.trace_dir is not None:
            marker(state.trace_dir, state.rank, "running").unlink(missing_ok=True)
            if orphan:  # (mpiexec kills the others at once when this one ends: they stop first)
                _stop_peers(Path(state.trace_dir))
        os._exit(128 + sig)


def _stop_peers(trace_dir: Path, within: float = 5.0) -> None:
    """Tell the other ranks another ended (SIGUSR1), and wait until they have stopped (at most
    ``within`` seconds)."""
    config = os.environ.get(CONFIG_ENV)
    if not config:
        return
    signal_ranks(trace_dir, config, signal.SIGUSR1)
    deadline = time.monotonic() + within
    while any(trace_dir.glob("rank-*.running")) and time.monotonic() < deadline:
        time.sleep(0.05)


def signal_ranks(trace_dir: Path, config: str, sig: int) -> None:
    """Signal every rank of the run of ``config`` still running (their ``rank-N.running`` markers)."""
    for running in trace_dir.glob("rank-*.running"):
        try:
            _signal_rank(int(running.read_text()), config, sig)
        except (ValueError, OSError):
            pass


def _signal_rank(pid: int, config: str, sig: int) -> None:
    """Signal ``pid`` if it is a rank of this run: its environment names this run's configuration
    (a marker left by a rank that died may name a process id reused since; the pidfd pins the process
    checked to the one signalled)."""
    fd = os.pidfd_open(pid)
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        if f"{CONFIG_ENV}={config}".encode() in environ:
            signal.pidfd_send_signal(fd, sig)
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    kind, target, args = _parse(sys.argv[1:] if argv is None else argv)
    state = watch_signals()
    from mpi4py import MPI

    from callid.mpiio import file as traced

    rank = MPI.COMM_WORLD.Get_rank()
    config_path = os.environ.get(CONFIG_ENV)
    code = 0
    tracer = None
    try:
        config = Config.load(config_path) if config_path else None
        trace_dir = config.trace_dir if config else os.environ.get("CALLID_TRACE_DIR", "callid-trace")
        state.rank, state.trace_dir = rank, trace_dir
        if config is not None:
            write_marker(trace_dir, rank, "running", str(os.getpid()))
        tracer = traced.Tracer(rank, trace_dir, config)
        state.flush = tracer.trace.close
        traced.install(tracer)
        if tracer.sysint is not None:  # (callid's own connections: not in the time of a traced call)
            tracer.sysint.connect()
        sys.argv = [target, *args]
        if kind == "module":
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, str(Path(target).resolve().parent))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as exc:
        code = int(exc.code) if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if code:
            write_marker(state.trace_dir, rank, "failed", f"exited with status {code}")
    except BaseException as exc:  # a failing rank stops the job (as mpi4py.run does)
        if isinstance(exc, OSError) or getattr(exc, "fs_failed", False):  # (a full disk, a lost server)
            fail_rank(state.trace_dir, rank, exc)  # (one line; the traceback in a file)
        else:
            if not isinstance(exc, CallidError):  # (callid's own errors are one line)
                traceback.print_exc()
            write_marker(state.trace_dir, rank, "failed", f"{type(exc).__name__}: {exc}")
        code = 1
    finally:
        if tracer is not None:
            try:
                traced.uninstall()
            except OSError as exc:  # (the log's last part cannot be written)
                if not code:
                    fail_rank(state.trace_dir, rank, exc)
                code = 1
        if state.trace_dir is not None:
            marker(state.trace_dir, rank, "running").unlink(missing_ok=True)
    if code:
        end_job(MPI.COMM_WORLD, code)
    return code


_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In a child before exec: SIGTERM it when this process dies (Linux), so a ``callid run`` killed
    with SIGKILL leaves nothing behind."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


if __name__ == "__main__":
    sys.exit(main())
