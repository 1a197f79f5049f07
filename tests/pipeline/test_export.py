"""Chrome trace-event export of a collective workload, checked against the flow rules."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.conftest import callid_cmd

pytestmark = pytest.mark.mpi


@pytest.fixture(scope="module")
def exported(collective_fanin, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export")
    arrows = collective_fanin.q("SELECT count(*), count(*) FILTER (WHERE n_callids > 1) FROM arrows")[0]
    result = callid_cmd("export", collective_fanin.db, "--format", "chrome", "-o", tmp / "trace.json")
    assert result.returncode == 0, result.stderr
    return json.loads((tmp / "trace.json").read_text())["traceEvents"], arrows


def _inside(events, ev) -> bool:
    return any(s["ph"] == "X" and s["pid"] == ev["pid"] and s["tid"] == ev["tid"]
               and s["ts"] <= ev["ts"] <= s["ts"] + s["dur"] for s in events)


def test_every_arrow_is_drawn_once(exported):
    events, (n_arrows, n_fanin) = exported
    flow_in = [e for e in events if e.get("flow_in")]
    starts = [e for e in events if e["ph"] == "s"]
    assert n_fanin > 0 and len(starts) == n_fanin  # fan-in arrows are v1 flow events
    assert len(flow_in) + len(starts) == n_arrows


def test_flow_ids_are_unique_and_every_end_lies_inside_a_slice(exported):
    events, _ = exported
    outs = Counter(e["bind_id"] for e in events if e.get("flow_out"))
    assert all(n == 1 for n in outs.values())
    assert {e["bind_id"] for e in events if e.get("flow_in")} <= set(outs)
    v1 = Counter((e["id"], e["ph"]) for e in events if e["ph"] in ("s", "f"))
    assert all(n == 1 for n in v1.values())
    assert {i for i, _ in v1} & {int(b, 16) for b in outs} == set()  # never reused across kinds
    assert all(e["bp"] == "e" for e in events if e["ph"] == "f")
    assert all(_inside(events, e) for e in events if e["ph"] in ("s", "f"))


def test_slices_are_on_rank_and_server_tracks_with_the_callid(exported):
    events, _ = exported
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert {"MPI ranks", "server io0", "server io1", "server meta0", "rank 3", "trove"} <= names
    calls = [e for e in events if e["ph"] == "X" and e["cat"] == "mpi"]
    assert calls and all(e["args"]["callid"].startswith("0x") for e in calls)
    assert all(e["dur"] > 0 for e in events if e["ph"] == "X")
