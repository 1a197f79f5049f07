"""The server event log: rows by column name, the CallIDs of a request or of the part an event serves."""

from __future__ import annotations

import pyarrow.parquet as pq

from callid_core.config import Config, ServerConfig
from server_sim.attribution import Share
from server_sim.events import ServerEvents

SENTINEL = (1 << 64) - 1


def _events(tmp_path, on: bool = True) -> ServerEvents:
    config = Config(run_id="r", servers=[ServerConfig("io0", ["io"], str(tmp_path))], trace_dir=str(tmp_path),
                    server_events=on)
    return ServerEvents(config, "io0")


def test_events_carry_the_request_s_callids_or_the_part_they_serve(tmp_path):
    events = _events(tmp_path)
    who = events.who({"callid": [5, 6], "rank": 3, "request_id": 9})
    assert (who.callid, who.callids, who.rank, who.req_id) == (SENTINEL, [5, 6], 3, 9)
    req = events.new_id()
    events.record(event_id=events.new_id(), layer="trove", op="trove_write", who=who, parent=req, handle=7,
                  offset=4096, size=100, t_start=10, t_end=20, share=Share([6], [100], [60], 40))
    events.record(event_id=req, layer="req", op="io_write", who=who, parent=-1, handle=7, offset=0, size=200,
                  t_start=5, t_end=30)
    events.record(event_id=events.new_id(), layer="req", op="getsize", who=events.who({}), parent=-1,
                  handle=8, offset=0, size=0, t_start=40, t_end=41)
    events.close()
    rows = pq.read_table(sorted(tmp_path.glob("server-io0.*.parquet"))).to_pylist()
    assert [(r["layer"], r["callid"], r["callids"], r["rank"], r["req_id"], r["parent"]) for r in rows] == [
        ("trove", 6, [6], 3, 9, req), ("req", SENTINEL, [5, 6], 3, 9, -1), ("req", SENTINEL, [], -1, -1, -1)]
    assert (rows[0]["handle"], rows[0]["offset"], rows[0]["size"], rows[0]["server"], rows[0]["clock"]) == (
        7, 4096, 100, "io0", "io0")
    # the part's shares and own bytes; the others, of no stated share and not one CallID: not known
    assert [(r["callid_bytes"], r["callid_own"], r["holes"]) for r in rows] == [
        ([100], [60], 40), ([], [], 0), ([], [], 0)]


def test_events_switched_off_log_nothing(tmp_path):
    events = _events(tmp_path, on=False)
    events.record(event_id=events.new_id(), layer="req", op="io_write", who=events.who({"callid": [5]}),
                  parent=-1, handle=1, offset=0, size=10, t_start=1, t_end=2)
    events.close()
    assert list(tmp_path.glob("*.parquet")) == []
