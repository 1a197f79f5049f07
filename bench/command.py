"""Commands run as a user runs them: the installed ``callid``, in its own process, timed from outside."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path


def callid_path() -> str:
    """The installed entry point beside this Python (a venv's bin/), else the one on PATH."""
    beside = Path(sys.executable).with_name("callid")
    return str(beside) if beside.exists() else shutil.which("callid") or "callid"


def run_command(argv: list[str], directory: Path, name: str, timeout: float,
                env: dict[str, str] | None = None) -> dict:
    """Run one command, its output into files in ``directory``; its exit, seconds, peak RSS, stderr's end.
    ``env``: variables added to this process's environment.

    The child is killed (SIGKILL, that process only) after ``timeout`` seconds."""
    with open(directory / f"{name}.out", "wb") as out, open(directory / f"{name}.err", "wb") as err:
        start = time.perf_counter()
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                 env={**os.environ, **env} if env else None)
        pidfd = os.pidfd_open(child.pid)  # (readable once the child exits; the pid stays ours until wait4)
        try:
            exited = bool(select.select([pidfd], [], [], timeout)[0])
        finally:
            os.close(pidfd)
        if not exited:
            os.kill(child.pid, signal.SIGKILL)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)  # (reaped here: Popen must not wait for it)
    lines = (directory / f"{name}.err").read_text(errors="replace").strip().splitlines()
    return {"exit": child.returncode, "timed_out": not exited, "seconds": round(seconds, 2),
            "peak_mib": round(usage.ru_maxrss / 1024, 1), "stderr_last": lines[-1].strip() if lines else ""}
