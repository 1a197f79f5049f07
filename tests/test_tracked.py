"""tests.tracked: what a command started is found and stopped even when orphaned; nothing else is
signalled, whatever its name."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.tracked import Tracked

#: starts a grandchild that outlives its parent (orphaned: adopted by the reaper), then ends
ORPHAN = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; "
          "time.sleep(60)'], start_new_session=True); print(p.pid)")


def _alive(proc: subprocess.Popen) -> bool:
    return proc.poll() is None


def test_an_orphaned_descendant_is_a_leftover_and_is_killed():
    with Tracked([sys.executable, "-c", ORPHAN], grace=0.5) as proc:
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and not proc.hang
    [leftover] = proc.leftovers
    assert leftover.startswith(f"{out.strip()} ") and "time.sleep(60)" in leftover
    assert not Path(f"/proc/{out.strip()}").exists()  # (killed, and reaped by the reaper)


def test_other_processes_of_the_same_name_are_neither_counted_nor_signalled(tmp_path):
    """A process this test did not start under the command, named like callid's, in another
    directory: untouched; one whose working directory is the command's: counted, not signalled."""
    names = [sys.executable, "-c", "import time; time.sleep(60)", "server_sim serve mpiexec callid.launch"]
    (tmp_path / "case").mkdir()
    beside = subprocess.Popen(names, cwd="/")
    inside = subprocess.Popen(names, cwd=tmp_path / "case")
    try:
        with Tracked([sys.executable, "-c", "print('done')"], grace=0.5, within=tmp_path / "case") as proc:
            proc.communicate(timeout=30)
        assert proc.returncode == 0
        assert proc.leftovers == [f"{inside.pid} {' '.join(names)} (not started by the command)"]
        assert _alive(beside) and _alive(inside)
    finally:
        for p in (beside, inside):
            p.kill()
            p.wait()


def test_a_hang_is_killed_with_everything_it_started():
    hang = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; "
            "time.sleep(60)']); time.sleep(60)")
    with Tracked([sys.executable, "-c", hang], timeout=1, grace=0.5) as proc:
        time.sleep(0.5)
        assert len(proc.descendants()) == 2  # the command and its child
        proc.communicate(timeout=30)
    assert proc.hang and proc.returncode == -signal.SIGKILL and proc.leftovers == []

