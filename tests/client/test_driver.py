"""The client's single-thread driver runs every exchange to its end, then raises the first failure."""

from __future__ import annotations

import socket
import threading

import pytest

from callid.mpiio import sysint as SI
from callid_core.config import Config, ServerConfig


class _FakeConn:
    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.lock = sock, threading.Lock()


def test_the_driver_runs_every_job_to_its_end_then_raises_the_first_failure():
    config = Config(run_id="r", servers=[ServerConfig(n, ["io"], "/nonexistent", port=1) for n in "abc"],
                    trace_dir="/nonexistent", callid_layout="64/23")
    client = SI.SysInt(config, 0, lambda *a: None)
    pairs = {name: socket.socketpair() for name in "ab"}
    client._conns = {name: _FakeConn(ours) for name, (ours, _) in pairs.items()}
    done = []

    def failing():
        yield SI.MORE
        raise SI.FsError(5, "server a failed")

    def answered():
        yield SI.WAIT  # readable: the peer has answered
        done.append(pairs["b"][0].recv(1))
        return "ok"

    pairs["b"][1].sendall(b"!")
    try:
        with pytest.raises(SI.FsError, match="server a failed"):
            client._parallel([("a", failing()), ("b", answered())])
        assert done == [b"!"]
        assert client._parallel([("b", iter(()))]) == [None]
        assert not any(c.lock.locked() for c in client._conns.values())
    finally:
        for ours, theirs in pairs.values():
            ours.close()
            theirs.close()
