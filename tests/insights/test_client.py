"""Client-side insights (Drishti's triggers) on a real run of ``programs/client_patterns.py``; the
table of insights and thresholds (docs/insights.md) is current."""

from __future__ import annotations

import pytest

from pipeline.insights import THRESHOLDS, all_insights, reference_markdown
from tests.conftest import ROOT
from tests.insights import insights_of, of_code

BLOCK, BLOCKS = 4096, (1500, 600)
CALLS = sum(BLOCKS)


@pytest.mark.mpi
@pytest.mark.slow
def test_client_patterns(tmp_path):
    found = insights_of(tmp_path / "out", "client_patterns.py", np=2)
    (small,) = of_code(found, "P701")
    assert small["severity"] == "high" and small["files"] == ["/pvfs2/patterns"]
    assert small["numbers"] == {"direction": "write", "requests": CALLS, "small": CALLS, "small_share": 1.0}
    (misaligned,) = of_code(found, "P702")
    assert misaligned["severity"] == "high"
    assert misaligned["numbers"] == {"requests": CALLS, "misaligned": CALLS, "misaligned_share": 1.0,
                                     "strip_size_bytes": 65536}
    (pattern,) = of_code(found, "P703")  # rank 0 descending: all but its first random; rank 1 consecutive
    assert pattern["severity"] == "high" and pattern["ranks"] == [0]
    assert pattern["numbers"] == {"direction": "write", "requests": CALLS, "random": BLOCKS[0] - 1,
                                  "sequential": BLOCKS[1] + 1, "consecutive": BLOCKS[1] - 1,
                                  "random_share": round((BLOCKS[0] - 1) / CALLS, 4)}
    (mix,) = of_code(found, "P704")
    assert mix["severity"] == "info"
    assert mix["numbers"] == {"writes": CALLS, "reads": 0, "write_bytes": CALLS * BLOCK, "read_bytes": 0,
                              "write_share": 1.0}
    (data,) = of_code(found, "P705")  # rank 0 makes 2.5 times the calls of rank 1: it is the slowest
    assert data["severity"] == "high"
    n = data["numbers"]
    assert (n["slowest_rank"], n["slowest_rank_bytes"], n["fastest_rank"], n["fastest_rank_bytes"]) == \
        (0, BLOCKS[0] * BLOCK, 1, BLOCKS[1] * BLOCK)
    assert n["imbalance_share"] == round((BLOCKS[0] - BLOCKS[1]) / CALLS, 4)
    (time,) = of_code(found, "P706")
    assert time["severity"] == "high" and time["numbers"]["slowest_rank"] == 0
    assert time["numbers"]["slowest_ns"] - time["numbers"]["fastest_ns"] > 0.15 * time["numbers"]["total_ns"]
    (independent,) = of_code(found, "P707")
    assert independent["severity"] == "high"
    assert independent["numbers"] == {"direction": "write", "requests": CALLS, "independent": CALLS,
                                      "independent_share": 1.0, "ranks": 2}
    (meta,) = of_code(found, "P708")  # each rank's open and close
    assert meta["severity"] == "info" and meta["numbers"]["calls"] == 4


def test_insights_are_declared_and_the_doc_is_current():
    insights = all_insights()
    assert len({i.code for i in insights}) == len(insights)
    used = {t for i in insights for t in i.thresholds}
    assert used <= set(THRESHOLDS)
    assert all(t.source for t in THRESHOLDS.values())
    assert (ROOT / "docs" / "insights.md").read_text() == reference_markdown(), \
        "docs/insights.md is stale: python -m pipeline.insights > docs/insights.md"
