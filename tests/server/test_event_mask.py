"""The event mask (the thesis' switch of each server layer's events), set when the servers start
(``callid run --server-layers``) and at run time (``callid servers events``: an event_mask request)."""

from __future__ import annotations

import os

import pyarrow.parquet as pq
import pytest

from callid.mpiio.sysint import SysInt
from callid.server_wire import RunError, event_mask
from callid_core.choices import SERVER_LAYERS
from server_sim import protocol as P
from tests.conftest import EXAMPLES, callid_cmd, cli
from tests.reliability.servers import call, start


def _events(group, server: str) -> list[dict]:
    parts = sorted((group.run_dir.parent / "parts").glob(f"server-{server}.*.parquet"))
    return [row for part in parts for row in pq.read_table(part).to_pylist()]


def test_a_server_logs_only_the_layers_of_its_mask_and_logs_each_change(tmp_path):
    group = start(tmp_path, server_layers=["req", "trove"])
    io = group.config.io_servers[0]
    secret = group.config.secret()
    client = SysInt(group.config, 0, lambda *a: None)
    try:
        assert event_mask(io, secret) == ["req", "trove"]  # (a query changes nothing)
        f = client.create("/pvfs2/masked", call(1), dfile_count=1)
        client.io(f, P.IoType.WRITE, [(0, 1 << 20)], memoryview(os.urandom(1 << 20)), call(2))
        assert event_mask(io, secret, ["req"]) == ["req"]
        client.io(f, P.IoType.WRITE, [(0, 1 << 20)], memoryview(os.urandom(1 << 20)), call(3))
        assert event_mask(io, secret, list(SERVER_LAYERS)) == list(SERVER_LAYERS)
        client.io(f, P.IoType.WRITE, [(0, 1 << 20)], memoryview(os.urandom(1 << 20)), call(4))
        with pytest.raises(RunError, match="refused a event_mask request .EINVAL"):
            event_mask(io, secret, ["disk"])
    finally:
        client.close()
        assert group.stop() == []
    rows = _events(group, io.name)
    layers = {callid: sorted({r["layer"] for r in rows if r["callid"] == callid}) for callid in (2, 3, 4)}
    assert layers == {2: ["req", "trove"], 3: ["req"], 4: ["flow", "req", "trove"]}
    masks = sorted((r["t_start"], r["offset"]) for r in rows if r["op"] == "event_mask")
    assert [bits for _, bits in masks] == [0b0001, 0b1111] and {r["layer"] for r in rows
                                                               if r["op"] == "event_mask"} == {"log"}


@pytest.mark.mpi
def test_a_run_with_layers_off_says_so_at_the_merge(tmp_path):
    out = tmp_path / "out"
    run = callid_cmd("run", "-n", 1, "--servers", 1, "-d", out, "--server-layers", "req,trove",
                     EXAMPLES / "mpi_io_test.py", "-b", "64KiB", "-i", 1)
    assert run.returncode == 0, run.stderr
    merged = cli("merge", out / "client.parquet", out / "server.parquet", "-o", out / "m.duckdb")
    assert merged.returncode == 0 and "did not log their flow, meta events (--server-layers)" in merged.stderr
    bad = callid_cmd("run", "-n", 1, "-d", tmp_path / "bad", "--server-layers", "req,disk",
                     EXAMPLES / "mpi_io_test.py")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "callid: error: --server-layers: 'disk' is not a server layer (one of req, flow, trove, meta)"]
