"""A minimal Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (stdlib only)."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time


def _high(fd: int) -> int:
    high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return high


class Browser:
    """Headless Chromium driven through fds 3 (commands) and 4 (replies)."""

    def __init__(self, chromium: str, flags: list[str], profile: str) -> None:
        to_r, self._to = os.pipe()
        self._from, from_w = os.pipe()
        # move the child's ends above 10, so redirecting them onto 3 and 4 cannot clobber them
        to_r, from_w = (_high(fd) for fd in (to_r, from_w))

        def onto_3_and_4() -> None:  # where Chromium expects the pipe (kept: close_fds=False)
            os.dup2(to_r, 3)
            os.dup2(from_w, 4)

        self.proc = subprocess.Popen([chromium, *flags, f"--user-data-dir={profile}",
                                      "--remote-debugging-pipe", "about:blank"],
                                     preexec_fn=onto_3_and_4, close_fds=False,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self._buf = b""
        self._id = 0
        self.session: str | None = None

    def send(self, method: str, timeout: float = 30, **params) -> dict:
        """Send one command (to the attached page, if any) and return its result."""
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            msg["sessionId"] = self.session
        os.write(self._to, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\0" not in self._buf:
                chunk = os.read(self._from, 1 << 16)
                if not chunk:
                    raise RuntimeError("chromium closed the pipe")
                self._buf += chunk
            raw, self._buf = self._buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
        raise TimeoutError(method)

    def open(self, url: str) -> None:
        target = self.send("Target.createTarget", url=url)["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]

    def js(self, expression: str):
        """Evaluate in the page; return the value."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.js(expression)
            if value:
                return value
            time.sleep(0.05)
        raise TimeoutError(expression)

    def mouse(self, kind: str, x: float, y: float, **extra) -> None:
        self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, **extra)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        os.close(self._to)
        os.close(self._from)
