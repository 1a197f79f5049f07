"""``callid report``: every figure checked against an independent computation on the same database, the
page drawn in headless Chromium (no script error, its plots present, a screenshot), and two runs compared.

The figures of the collective example come from the ``collective_fanin`` run (MPI); the binning of many
ranks into heatmap rows from a small synthetic trace (no MPI).
"""

from __future__ import annotations

import base64
import json
import os
from collections import Counter

import pytest

from callid import api
from pipeline.domain import DATA_CALL_WHERE, DATA_CALLS_SQL
from pipeline.merged import open_merged
from tests.conftest import COLLECTIVE_FANIN, cli, query, traced
from tests.pipeline.test_timeline import CHROMIUM, FLAGS

needs_chromium = pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CALLID_REQUIRE_BROWSER"),
                                    reason="chromium is not installed (CI installs it)")


def _direction(func: str) -> str:
    return "read" if "read" in func else "write"


def _log2_lo(size: int) -> int:
    return 1 << (size.bit_length() - 1)


@pytest.fixture(scope="module")
def report(collective_fanin):
    from pipeline.report import compute_report

    return compute_report(open_merged(str(collective_fanin.db)))


# ----------------------------------------------------------------------------- pure helpers (no MPI)

def test_value_bins_are_exact_up_to_16_then_powers_of_two():
    from pipeline.report import _log2_bins, _value_bins

    exact = _value_bins([("a", 1, 3), ("a", 4, 1), ("b", 2, 5)], ["a", "b"])
    assert exact == {"lo": [1, 2, 3, 4], "hi": [1, 2, 3, 4], "counts": {"a": [3, 0, 0, 1], "b": [0, 5, 0, 0]},
                     "exact": True}
    wide = _value_bins([("x", 0, 2), ("x", 1, 1), ("x", 5, 4), ("x", 7, 1), ("x", 100, 6)], ["x"])
    assert wide["lo"] == [0, 1, 2, 4, 8, 16, 32, 64] and wide["hi"] == [0, 1, 3, 7, 15, 31, 63, 127]
    assert wide["counts"]["x"] == [2, 1, 0, 5, 0, 0, 0, 6] and not wide["exact"]
    sizes = _log2_bins([("read", 10, 2), ("write", 12, 3)], ("read", "write"))
    assert sizes == {"lo": [1024, 2048, 4096], "hi": [2047, 4095, 8191],
                     "counts": {"read": [2, 0, 0], "write": [0, 0, 3]}}


def test_many_ranks_share_heatmap_rows_and_every_ns_is_kept(synthetic):
    from pipeline.report import RANK_ROWS, TIME_BINS, compute_report

    data = compute_report(open_merged(str(synthetic)))
    rt = data["rank_time"]
    assert len(rt["rows"]) == RANK_ROWS and all(len(r) == TIME_BINS for r in rt["busy_ns"])
    # consecutive ranks, every rank in one row, 1 or 2 ranks per row (100 over 64)
    assert [r["lo"] for r in rt["rows"][1:]] == [r["hi"] + 1 for r in rt["rows"][:-1]]
    assert rt["rows"][0]["lo"] == 0 and rt["rows"][-1]["hi"] == 99
    assert sum(r["ranks"] for r in rt["rows"]) == 100 and {r["ranks"] for r in rt["rows"]} == {1, 2}
    busy = query(synthetic, "SELECT sum(dur_ns) FROM calls WHERE t_end > t_start")[0][0]
    assert sum(map(sum, rt["busy_ns"])) == busy
    per_row = dict(query(synthetic, "SELECT rank, sum(dur_ns) FROM calls WHERE t_end > t_start "
                                    "GROUP BY rank"))
    for row, cells in zip(rt["rows"], rt["busy_ns"]):
        assert sum(cells) == sum(per_row.get(r, 0) for r in range(row["lo"], row["hi"] + 1))
    # a collective's disk operation serves all 100 calls: the fan-in histogram goes to powers of 2
    fanin = data["fan"]["calls_per_disk_op"]
    assert not fanin["exact"] and fanin["lo"][-1] == 64 and fanin["hi"][-1] == 127
    assert sum(map(sum, fanin["counts"].values())) == data["overview"]["disk_ops"] + \
        query(synthetic, "SELECT count(*) FROM server_ops WHERE layer = 'meta'")[0][0]
    # synthetic: no configuration of strips and buffers to show
    assert data["run"]["synthetic"] and data["run"]["strip_size"] is None


# ----------------------------------------------------------------------------- the collective example

@pytest.mark.mpi
def test_overview_figures_equal_sql(collective_fanin, report):
    db = collective_fanin.db
    o = report["overview"]
    calls = query(db, "SELECT func, rank, size, bytes, t_start, t_end, dur_ns FROM calls")
    assert o["bytes"] == sum(c[3] or 0 for c in calls) == query(db, "SELECT sum(bytes) FROM calls")[0][0]
    assert o["calls"] == len(calls) and o["ranks"] == len({c[1] for c in calls}) == 4
    data = query(db, f"SELECT func, rank, bytes, t_start, t_end, dur_ns FROM ({DATA_CALLS_SQL})")
    for direction in ("read", "write"):
        mine = [c for c in data if _direction(c[0]) == direction]
        per_rank = Counter()
        for c in mine:
            per_rank[c[1]] += c[5]
        span = max(c[4] for c in mine) - min(c[3] for c in mine)
        nbytes = sum(c[2] for c in mine)
        assert o[f"{direction}_calls"] == len(mine) and o[f"{direction}_bytes"] == nbytes
        assert o[f"{direction}_span_ns"] == span
        assert o[f"{direction}_slowest_rank_ns"] == max(per_rank.values())
        assert o[f"{direction}_mib_per_s"] == round(nbytes / 1048576 / (span / 1e9), 3)
    # the example: 4 ranks write 2 blocks of 1 KiB each, then each reads the whole 8 KiB file
    assert (o["write_calls"], o["write_bytes"], o["read_calls"], o["read_bytes"]) == (4, 8192, 4, 32768)
    t0, t1 = query(db, """SELECT min(s), max(e) FROM (SELECT t_start s, t_end e FROM calls
                       UNION ALL SELECT t_start, t_end FROM server_ops)""")[0]
    assert (o["t0_ns"], o["duration_ns"]) == (t0, t1 - t0)
    disk = dict(query(db, "SELECT op, sum(size) FROM server_ops WHERE op IN ('trove_read', 'trove_write') "
                       "GROUP BY op"))
    assert (o["disk_read_bytes"], o["disk_write_bytes"]) == (disk["trove_read"], disk["trove_write"])
    assert o["io_servers"] == 2 and o["meta_servers"] == 1 and o["files"] == 1
    assert report["run"]["strip_size"] == 65536 and not report["run"]["synthetic"]


@pytest.mark.mpi
def test_histograms_count_every_call_and_disk_operation(collective_fanin, report):
    db = collective_fanin.db
    sizes = report["access_sizes"]
    data = query(db, f"SELECT func, size FROM ({DATA_CALLS_SQL})")
    for direction in ("read", "write"):
        want = Counter(_log2_lo(s) for f, s in data if _direction(f) == direction)
        got = {lo: n for lo, n in zip(sizes["lo"], sizes["counts"][direction]) if n}
        assert got == want
    assert sum(map(sum, sizes["counts"].values())) == len(data) == 8
    assert {lo: n for lo, n in zip(sizes["lo"], sizes["counts"]["write"]) if n} == {2048: 4}
    disk = report["disk_sizes"]
    ops = query(db, "SELECT op, size FROM server_ops WHERE op IN ('trove_read', 'trove_write') AND size > 0")
    for direction in ("read", "write"):
        want = Counter(_log2_lo(s) for op, s in ops if op == f"trove_{direction}")
        assert {lo: n for lo, n in zip(disk["lo"], disk["counts"][direction]) if n} == want
    # fan-out: per function, the calls that reached a disk by their disk operations and servers
    fan = report["fan"]
    rows = query(db, "SELECT func, disk_ops, servers FROM fanout WHERE disk_ops > 0")
    assert fan["funcs"] == sorted({r[0] for r in rows})
    for key, col in (("disk_ops_per_call", 1), ("servers_per_call", 2)):
        hist = fan[key]
        assert hist["exact"]
        for func in fan["funcs"]:
            want = Counter(r[col] for r in rows if r[0] == func)
            assert {lo: n for lo, n in zip(hist["lo"], hist["counts"][func]) if n} == want
    # fan-in: the disk operations by the calls they serve; one aggregator serves all 4 ranks
    hist = fan["calls_per_disk_op"]
    served = query(db, "SELECT layer, len(callids) FROM server_ops WHERE layer IN ('trove', 'meta')")
    for layer in ("trove", "meta"):
        want = Counter(n for lay, n in served if lay == layer)
        assert {lo: n for lo, n in zip(hist["lo"], hist["counts"][layer]) if n} == want
    assert hist["lo"][-1] == 4 and hist["counts"]["trove"][-1] > 0


@pytest.mark.mpi
def test_heatmaps_add_up_to_the_calls_and_disk_bytes(collective_fanin, report):
    from pipeline.report import TIME_BINS

    db = collective_fanin.db
    rt, st = report["rank_time"], report["server_time"]
    assert [r["lo"] for r in rt["rows"]] == [0, 1, 2, 3] and all(r["ranks"] == 1 for r in rt["rows"])
    per_rank = dict(query(db, "SELECT rank, sum(dur_ns) FROM calls WHERE t_end > t_start GROUP BY rank"))
    assert [sum(cells) for cells in rt["busy_ns"]] == [per_rank[r] for r in range(4)]
    assert all(0 <= v <= rt["bin_ns"] for cells in rt["busy_ns"] for v in cells)  # one rank per row
    assert rt["bin_ns"] * TIME_BINS > report["overview"]["duration_ns"]
    disk = dict(query(db, """SELECT server, sum(size) FROM server_ops
                             WHERE op IN ('trove_read', 'trove_write') GROUP BY server"""))
    ops = dict(query(db, "SELECT server, count(*) FROM server_ops WHERE op IN ('trove_read', 'trove_write') "
                      "GROUP BY server"))
    for server, cells, counts in zip(st["servers"], st["bytes"], st["ops"]):
        assert sum(cells) == disk.get(server, 0) and sum(counts) == ops.get(server, 0)
    assert sum(map(sum, st["bytes"])) == report["overview"]["disk_read_bytes"] + \
        report["overview"]["disk_write_bytes"]
    # each operation in the bin it starts in
    t0, width = report["overview"]["t0_ns"], st["bin_ns"]
    writes = query(db, "SELECT server, t_start, size FROM server_ops WHERE op = 'trove_write'")
    for server, start, size in writes:
        assert st["bytes"][st["servers"].index(server)][(start - t0) // width] >= size


@pytest.mark.mpi
def test_files_servers_findings(collective_fanin, report):
    from pipeline.insights import count_insights

    db = collective_fanin.db
    (row,) = report["files"]["rows"]
    calls = query(db, f"SELECT rank, func, bytes, dur_ns, {DATA_CALL_WHERE} FROM calls")
    assert row["file"] == "/pvfs2/collective" and row["calls"] == len(calls) == 28 and row["ranks"] == 4
    assert row["bytes_read"] == sum(c[2] for c in calls if c[4] and "read" in c[1]) == 32768
    assert row["bytes_written"] == sum(c[2] for c in calls if c[4] and "write" in c[1]) == 8192
    assert row["time_ns"] == sum(c[3] for c in calls)
    assert (row["servers"], row["disk_ops"], row["disk_bytes"]) == query(db, """
        SELECT count(DISTINCT server), count(DISTINCT (server, event_id)), sum(share_bytes) FROM arrows
        WHERE layer IN ('trove', 'meta')""")[0]
    servers = {r["server"]: r for r in report["servers"]}
    assert servers["meta0"]["role"] == "meta" and servers["io0"]["role"] == "io"
    assert sum(r["bytes_read"] + r["bytes_written"] for r in report["servers"]) == 16384
    findings = api.check(db).findings
    assert {c["code"]: c["count"] for c in report["checks"]} == Counter(f["code"] for f in findings)
    assert all(len(c["examples"]) == min(c["count"], 3) for c in report["checks"])
    insights = api.insights(db)
    assert len(report["insights"]) == len(insights)
    assert report["overview"]["insights_high"] == count_insights(insights)["high"]
    assert all(isinstance(c, str) and c.startswith("0x") for f in report["insights"] for c in f["calls"])


@pytest.mark.mpi
def test_the_page_embeds_the_figures_as_they_are(report):
    import copy
    import json
    import re

    from pipeline.report import render_report

    data = copy.deepcopy(report)
    data["files"]["rows"][0]["file"] = "</script><script>alert(1)</script>"
    page = render_report(data, "a <b>name</b>")
    assert page.count("</script>") == 2  # the figures' and the page's own: a name cannot end them
    embedded = re.search(r'<script id="data" type="application/json">(.*?)</script>', page, re.S).group(1)
    assert json.loads(embedded) == {"mode": "single", "names": ["a <b>name</b>"],
                                    "runs": [json.loads(json.dumps(data))]}  # (tuples as lists)


# ----------------------------------------------------------------------------- the page in Chromium

def _page_in_chromium(html, tmp, name: str) -> dict:
    """Open the page, wait for it to draw, screenshot it whole; what the page says about itself."""
    from tests.cdp import Browser

    browser = Browser(CHROMIUM, [f for f in FLAGS if not f.startswith("--virtual")], str(tmp / f"cdp-{name}"))
    try:
        browser.open(html.as_uri())
        browser.wait_for("document.body.dataset.ready")
        page = browser.js("""({ready: document.body.dataset.ready, errors: window.__errors,
            svgs: document.querySelectorAll('svg').length, toc: document.querySelectorAll('nav li').length,
            plotted: [...document.querySelectorAll('svg')].filter(s => s.querySelector('rect')).length,
            texts: [...document.querySelectorAll('svg text')].map(t => t.textContent),
            why: [...document.querySelectorAll('details.why summary')].map(t => t.textContent),
            height: document.documentElement.scrollHeight, width: document.documentElement.scrollWidth})""")
        browser.send("Emulation.setDeviceMetricsOverride", width=1400, height=min(page["height"], 16000),
                     deviceScaleFactor=1, mobile=False)
        shot = browser.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
    finally:
        browser.close()
    png = tmp / f"{name}.png"
    png.write_bytes(base64.b64decode(shot["data"]))
    page["png"] = png
    return page


@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.browser
@needs_chromium
def test_report_page_draws_in_chromium(collective_fanin, tmp_path_factory):

    tmp = tmp_path_factory.mktemp("report")
    html = tmp / "report.html"
    summary = api.report([collective_fanin.db], html)
    text = html.read_text()
    assert summary["output"] == str(html) and summary["bytes"] == len(text.encode()) < 200_000
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")  # self-contained
    page = _page_in_chromium(html, tmp, "report")
    assert page["ready"] == "1" and page["errors"] == []
    assert page["toc"] == 13 and page["svgs"] >= 12 and page["plotted"] == page["svgs"]
    assert page["width"] <= 1400  # nothing wider than a laptop screen
    # each slowest call says why it is slow (callid why), and how to ask
    stamped = [r["callid_hex"] for r in api.stats(collective_fanin.db)["slowest_calls"] if r["callid_hex"]]
    assert len(page["why"]) == len(stamped) > 0
    assert all(f"callid why {collective_fanin.db} {c}" in w for c, w in zip(stamped, page["why"]))
    # axes name their units; heatmaps have a colour scale
    for label in ("time in MPI-IO (ms)", "busy (%)", "disk (KiB)", "calls", "disk operations per call",
                  "time since the run's first call (ms)", "size (power-of-2 bins: [2^k, 2^(k+1)) bytes)"):
        assert label in page["texts"], label
    assert page["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and page["png"].stat().st_size > 50_000
    print(f"report: {html} ({summary['bytes']} bytes, {summary['seconds']} s); screenshot: {page['png']}")


@pytest.fixture(scope="module")
def two_aggregators(tmp_path_factory):
    """The collective example again with 2 aggregators instead of 1 (the hint cb_nodes changed)."""
    args = [str(a) for a in COLLECTIVE_FANIN]
    args[args.index("--cb-nodes") + 1] = "2"
    return traced(tmp_path_factory.mktemp("cb2"), "out", *args)


@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.browser
@needs_chromium
def test_comparison_page(collective_fanin, two_aggregators, tmp_path_factory):
    from pipeline.insights import compare_insights
    from pipeline.report import FIGURES, compare_reports, compute_report

    a, b = str(collective_fanin.db), str(two_aggregators.db)
    datas = [compute_report(open_merged(a)), compute_report(open_merged(b))]
    diff = compare_reports(datas)
    assert [r["key"] for r in diff["figures"]] == [k for k, _, _, _ in FIGURES]
    rows = {r["key"]: r for r in diff["figures"]}
    assert rows["write_bytes"]["values"] == [8192, 8192] and rows["write_bytes"]["ratios"] == [1.0]
    ops = [d["overview"]["disk_ops"] for d in datas]
    assert rows["disk_ops"]["values"] == ops and rows["disk_ops"]["ratios"] == [round(ops[1] / ops[0], 4)]
    assert diff["insights"] == [compare_insights(datas[0]["insights"], datas[1]["insights"])]
    tmp = tmp_path_factory.mktemp("compare")
    html = tmp / "compare.html"
    summary = api.report([a, b], html)
    assert summary["runs"] == 2
    page = _page_in_chromium(html, tmp, "compare")
    assert page["ready"] == "1" and page["errors"] == []
    # every plot for both runs (the overview is a table side by side)
    single = 12 - 1
    assert page["svgs"] == 2 * single and page["plotted"] == page["svgs"] and page["width"] <= 1400
    print(f"comparison: {html} ({summary['bytes']} bytes); screenshot: {page['png']}")


@pytest.mark.mpi
def test_the_command(collective_fanin, tmp_path):
    out = tmp_path / "r.html"
    res = cli("report", collective_fanin.db, "-o", out, "--json")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["output"] == str(out) and summary["bytes"] == out.stat().st_size and summary["runs"] == 1
    assert not list(tmp_path.glob(".*"))  # written under a temporary name, then renamed
    for bad, says in ((("report", collective_fanin.db, collective_fanin.db, collective_fanin.db),
                       "two to compare"),
                      (("report", tmp_path / "missing.duckdb", "-o", tmp_path / "x.html"), "no such file")):
        res = cli(*bad)
        assert res.returncode == 2 and says in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert not (tmp_path / "x.html").exists()
