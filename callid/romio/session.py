"""The ranks of a run on the real MPI library and their FUSE mount, in a mount namespace of their own.

``callid run`` starts this in a new mount namespace (:func:`enter_namespace`, before exec): the mount
is seen by this run's processes only (other runs may mount the same path at once), and it goes
away with them whatever ends them.  This process mounts the FUSE client, runs the launcher
command, unmounts, and exits with the launcher's status; SIGTERM, SIGINT and SIGHUP are passed on
to the launcher.

    python -m callid.romio.session --mountpoint DIR --records PARTS --log FILE -- CLIENT ARGS -- MPIEXEC ARGS
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from callid.launch import die_with_parent
from callid.romio.mount import READY

#: seconds the FUSE client has to mount, and to unmount once the ranks ended
MOUNT_TIMEOUT = 30.0
_CLONE_NEWNS = 0x00020000
_MS_REC, _MS_PRIVATE = 0x4000, 0x40000


def enter_namespace() -> None:
    """In a child before exec: a mount namespace of its own, whose mounts do not propagate back.
    (Root, or a kernel that lets users make namespaces: ``OSError`` otherwise.)"""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot make a mount namespace: {os.strerror(err)}")
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot make the mounts private: {os.strerror(err)}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv.count("--") < 2:
        print("usage: python -m callid.romio.session OPTIONS -- CLIENT ARGS -- LAUNCHER ARGS",
              file=sys.stderr)
        return 2
    first = argv.index("--")
    second = argv.index("--", first + 1)
    parser = argparse.ArgumentParser(prog="python -m callid.romio.session")
    parser.add_argument("--mountpoint", required=True, type=Path)
    parser.add_argument("--records", required=True, type=Path)
    parser.add_argument("--log", required=True, type=Path, help="the FUSE client's output")
    args = parser.parse_args(argv[:first])
    client_cmd, launcher_cmd = argv[first + 1:second], argv[second + 1:]
    args.mountpoint.mkdir(parents=True, exist_ok=True)
    ready = args.records / READY
    ready.unlink(missing_ok=True)
    with open(args.log, "wb") as log:
        client = subprocess.Popen(client_cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                  preexec_fn=die_with_parent)
    deadline = time.monotonic() + MOUNT_TIMEOUT
    while not ready.exists():
        if client.poll() is not None:
            print(f"callid: the FUSE client did not mount {args.mountpoint} (exit status "
                  f"{client.returncode}; see {args.log})", file=sys.stderr)
            return 1
        if time.monotonic() > deadline:
            client.kill()
            print(f"callid: the FUSE client did not mount {args.mountpoint} within {MOUNT_TIMEOUT:.0f} s",
                  file=sys.stderr)
            return 1
        time.sleep(0.02)
    launcher = subprocess.Popen(launcher_cmd, preexec_fn=die_with_parent)

    def forward(signum: int, frame: object) -> None:
        if launcher.poll() is None:
            launcher.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    status = launcher.wait()
    client.send_signal(signal.SIGTERM)  # (libfuse unmounts and returns; the client flushes its log)
    try:
        client.wait(timeout=MOUNT_TIMEOUT)
    except subprocess.TimeoutExpired:
        client.kill()
        client.wait()
        print(f"callid: the FUSE client did not stop; killed (its last second of events is lost; "
              f"see {args.log})", file=sys.stderr)
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main())
