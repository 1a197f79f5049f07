"""Run a command so that every process it starts, and only those, can be found and stopped.

The command runs under a small reaper process that is a *child subreaper* (Linux ``prctl``): a
process the command started whose parent ends (a server of a killed ``callid run``, a rank whose
``mpiexec`` died) is adopted by the reaper instead of by init, so the command's descendants stay
the reaper's descendants, found by their parent ids in ``/proc``, whatever became of their
parents.  Nothing is looked up by name: other callid runs on the machine are never seen, counted
or signalled.  After the command ends the reaper waits ``grace`` seconds for its descendants to
end, then kills those still running and reports them as leftovers (with processes of the machine
whose working directory or arguments lie inside ``within``, which are counted, never signalled).

``python tests/tracked.py REPORT_FD TIMEOUT GRACE WITHIN -- COMMAND...`` is the reaper (standard
library only); :class:`Tracked` starts it and reads its report.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

_PR_SET_CHILD_SUBREAPER = 36


def _stat(pid: str) -> tuple[int, str] | None:
    """(parent id, state) of process ``pid``, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, ppid = text.rpartition(")")[2].split()[:2]  # (the name in parentheses may hold anything)
    return int(ppid), state


def _args(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def descendants(root: int) -> dict[int, str]:
    """The running (not zombie) processes below ``root``: pid -> command line."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := _stat(entry)) and st[1] != "Z":
            children.setdefault(st[0], []).append(int(entry))
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return {pid: _args(pid) for pid in sorted(found)}


def _inside(within: str, root: int) -> dict[int, str]:
    """Processes other than ``root``'s own and its ancestors whose working directory or arguments are
    inside the directory ``within``."""
    mine = {root, *descendants(root)}
    pid = root
    while pid > 1 and (st := _stat(str(pid))):
        mine.add(pid := st[0])
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in mine:
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            cwd = ""
        args = _args(int(entry))
        if args and (cwd == within or cwd.startswith(within + "/") or within in args):
            found[int(entry)] = args
    return found


def signal_descendant(root: int, pid: int, sig: int) -> bool:
    """Send ``sig`` to ``pid`` if it is a running process below ``root`` (checked through a pidfd, so a
    process id reused meanwhile is never signalled); whether it was sent."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        if pid not in descendants(root):
            return False
        signal.pidfd_send_signal(fd, sig)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _reap() -> None:
    """Collect the exit status of adopted children that have ended (zombies)."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def _reaper(report_fd: int, timeout: float, grace: float, within: str, command: list[str]) -> None:
    me = os.getpid()
    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    report = os.fdopen(report_fd, "w", buffering=1)
    child = subprocess.Popen(command)
    # (the command's output reaches its end when the command and what it started close it, not the reaper)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    report.write(f"{child.pid}\n")
    hang = False
    try:
        child.wait(timeout=timeout or None)
    except subprocess.TimeoutExpired:
        hang = True
        for pid in descendants(me):
            signal_descendant(me, pid, signal.SIGKILL)
        child.wait()
    deadline = time.monotonic() + grace
    while (left := descendants(me)) and time.monotonic() < deadline:
        _reap()
        time.sleep(0.1)
    leftovers = [f"{pid} {args}" for pid, args in left.items()]
    if within:
        leftovers += [f"{pid} {args} (not started by the command)"
                      for pid, args in _inside(within, me).items()]
    for pid in left:
        signal_descendant(me, pid, signal.SIGKILL)
    report.write(json.dumps({"returncode": child.returncode, "hang": hang, "leftovers": leftovers}) + "\n")
    while descendants(me) and time.monotonic() < deadline + 10:
        _reap()
        time.sleep(0.05)
    _reap()


class Tracked:
    """A command run under a reaper of its own (see the module's docstring), like ``subprocess.Popen``.

    ``pid`` is the command's; ``stdout``/``stderr`` its pipes.  After :meth:`communicate`:
    ``returncode`` (the command's), ``hang`` (it outlived ``timeout`` and was killed with everything
    it started) and ``leftovers`` (what still ran ``grace`` seconds after it ended, then killed).
    """

    def __init__(self, args: list, *, timeout: float | None = None, grace: float = 10.0,
                 within: Path | None = None, **popen) -> None:
        popen.setdefault("stdout", subprocess.PIPE)
        popen.setdefault("stderr", subprocess.PIPE)
        popen.setdefault("text", True)
        read, write = os.pipe()
        self._reaper = subprocess.Popen(
            [sys.executable, __file__, str(write), str(timeout or 0), str(grace),
             str(Path(within).resolve()) if within else "", "--", *map(str, args)],
            pass_fds=(write,), start_new_session=True, **popen)
        os.close(write)
        self._report = os.fdopen(read)
        started = self._report.readline()
        if not started:  # (the command could not be started: the reaper says why on its stderr)
            self._reaper.communicate()
            raise RuntimeError(f"cannot start {args[0]} (reaper exit {self._reaper.returncode})")
        self.pid = int(started)
        self.stdout, self.stderr = self._reaper.stdout, self._reaper.stderr
        self.returncode: int | None = None
        self.hang = False
        self.leftovers: list[str] = []

    def descendants(self) -> dict[int, str]:
        """The command and every process it started that still runs: pid -> command line."""
        return descendants(self._reaper.pid)

    def send_signal(self, sig: int, pid: int | None = None) -> None:
        """Signal the command, or ``pid`` if it is one of the processes it started."""
        signal_descendant(self._reaper.pid, self.pid if pid is None else pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Its output, once it and everything it started have ended (or been killed)."""
        out, err = self._reaper.communicate(timeout=timeout)
        outcome = json.loads(self._report.readline() or "null")
        self._report.close()
        if outcome is None:
            raise RuntimeError(f"the reaper of {self.pid} ended without a report "
                               f"(exit {self._reaper.returncode})")
        self.returncode, self.hang, self.leftovers = (outcome[k] for k in ("returncode", "hang", "leftovers"))
        return out, err

    def __enter__(self) -> Tracked:
        return self

    def __exit__(self, *exc) -> None:
        if self.returncode is None:  # (a test that failed before communicate: stop what it started)
            for pid in self.descendants():
                self.send_signal(signal.SIGKILL, pid)
            self.communicate()


if __name__ == "__main__":
    cut = sys.argv.index("--")
    fd, timeout, grace, within = sys.argv[1:cut]
    _reaper(int(fd), float(timeout), float(grace), within, sys.argv[cut + 1:])
