"""``callid view``: the page's detail and summary (what is drawn in full, what in time bins, within
which limits), and the page itself in real headless Chromium: the axis, lanes, sub-lanes, arrows,
hover, search, on traced runs and on a 1 M-event synthetic trace.

Chromium comes from Debian's ``chromium`` package, which ``.ci/run`` installs; CI sets
CALLID_REQUIRE_BROWSER=1 so a missing browser fails there instead of skipping.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import zlib

import numpy as np
import pytest

from callid import api
from callid_core.errors import BadValue
from callid_core.units import RankSet
from pipeline.selection import Selection
from pipeline.timeline import MAX_DETAIL, _column, sublanes
from tests.conftest import cli, query

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,900", "--virtual-time-budget=5000"]

needs_chromium = pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CALLID_REQUIRE_BROWSER"),
                                    reason="chromium is not installed (CI installs it)")


def _synth(tmp, *args: str):
    """``callid synth`` + ``callid merge`` as a user would; the merged database's path."""
    out = tmp / "synth"
    made = cli("synth", *args, "-d", out)
    assert made.returncode == 0, made.stderr
    db = out / "m.duckdb"
    merged = cli("merge", out / "client.parquet", out / "server.parquet", "-o", db)
    assert merged.returncode == 0, merged.stderr
    return db


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A synthetic trace of 8 ranks and 2 servers (~30 k events, aggregated requests included)."""
    return _synth(tmp_path_factory.mktemp("small"), "--ranks", "8", "--servers", "2", "--calls", "3000",
                  "--fanout", "4", "--seed", "1")


def _events(db) -> int:
    return query(db, "SELECT (SELECT count(*) FROM calls) + (SELECT count(*) FROM server_ops) + "
                  "(SELECT count(*) FROM arrows WHERE layer IN ('trove', 'meta'))")[0][0]


# ----------------------------------------------------------------------------- the data (no browser)

def test_column_encoding_round_trips():
    values = np.array([5, -3, 2**40, 0, 7, -(2**50)], dtype=np.int64)
    for delta in (False, True):
        col = _column(values, delta)
        raw = np.frombuffer(zlib.decompress(base64.b64decode(col["z"])), dtype=np.uint8)
        dtype = {1: "<i1", 2: "<i2", 4: "<i4", 8: "<i8"}[col["w"]]
        back = raw.reshape(col["w"], col["n"]).T.copy().view(dtype).ravel().astype(np.int64)
        assert (np.cumsum(back) if delta else back).tolist() == values.tolist()
    assert _column(np.arange(100, 1100), delta=True)["w"] == 1  # sorted times: one byte a value


def test_sublanes_never_overlap():
    lane = np.array([0, 0, 0, 0, 1, 1])
    t0 = np.array([0, 5, 10, 12, 0, 10])
    t1 = np.array([10, 20, 12, 30, 10, 20])  # lane 0: [0,10) [5,20) [10,12) [12,30); lane 1 touches
    assert sublanes(lane, t0, t1).tolist() == [0, 1, 0, 0, 0, 0]
    rng = np.random.default_rng(1)
    lane, t0 = rng.integers(0, 3, 2000), rng.integers(0, 10**6, 2000)
    t1 = t0 + rng.integers(0, 5000, 2000)
    sub = sublanes(lane, t0, t1)
    for key in set(zip(lane.tolist(), sub.tolist())):
        pick = (lane == key[0]) & (sub == key[1])
        order = np.argsort(t0[pick], kind="stable")
        assert (t0[pick][order][1:] >= t1[pick][order][:-1]).all()
    assert sublanes(np.zeros(5, int), np.zeros(5, int), np.zeros(5, int)).tolist() == [0, 1, 2, 3, 4]


def test_the_detail_is_bounded_and_the_rest_summarised(small, tmp_path):
    total = _events(small)
    steps: list[str] = []
    full = api.view(small, (tmp_path / "all.html"), Selection(), 10**6, steps.append)
    assert full["detail_events"] == total and full["summarised_events"] == 0
    assert full["detail_until_ns"] is None and full["arrow_bundles"] == 0
    assert {"choosing the detail", "detail: arrows", "writing the page"} <= set(steps)
    for detail in (5000, 0):
        part = api.view(small, (tmp_path / "part.html"), Selection(), detail)
        assert part["detail_events"] <= detail and part["detail_events"] >= 0.9 * detail
        assert part["detail_events"] + part["summarised_events"] == total
        assert part["summary_cells"] > 0 and part["arrow_bundles"] > 0
        page = (tmp_path / "part.html").read_text()
        assert "Summarised" in page and "--window" in page and "callid report" in page
    # the detail is the earliest events: every call before the cut, none after
    cut = api.view(small, (tmp_path / "p.html"), Selection(), 5000)["detail_until_ns"]
    calls = query(small, f"SELECT count(*) FROM calls WHERE t_rel_ns < {cut}")[0][0]
    assert api.view(small, (tmp_path / "p.html"), Selection(), 5000)["detail_calls"] == calls


def test_a_selection_is_detailed_alone(small, tmp_path):
    cut = api.view(small, (tmp_path / "p.html"), Selection(), 5000)["detail_until_ns"]
    window = (cut + 10_000_000, cut + 12_000_000)
    sel = Selection(window=window, ranks=RankSet.of({0, 1}))
    got = api.view(small, (tmp_path / "w.html"), sel, 5000)
    assert got["lanes"] == 2 + 4 and got["summarised_events"] == 0  # ranks 0 and 1, 2 servers x 2 layers
    calls = query(small, f"SELECT count(*) FROM calls WHERE rank IN (0, 1) AND t_rel_ns >= {window[0]} "
                      f"AND t_rel_ns < {window[1]}")[0][0]
    assert got["detail_calls"] == calls > 0


def test_too_much_detail_is_refused_in_one_line(small, tmp_path):
    with pytest.raises(BadValue, match="--detail"):
        api.view(small, (tmp_path / "x.html"), Selection(), MAX_DETAIL + 1)
    view = cli("view", small, "-o", tmp_path / "x.html", "--detail", str(MAX_DETAIL + 1))
    assert view.returncode == 2 and "Traceback" not in view.stderr
    assert len(view.stderr.strip().splitlines()) == 1 and "--window" in view.stderr
    assert not (tmp_path / "x.html").exists()


def test_a_selection_of_nothing_or_of_an_unknown_server_is_refused_in_one_line(small, tmp_path):
    for command, says in ((("view", "--window", "1000s:"), "nothing to view"),
                          (("view", "--servers", "io0,nope"), "--servers: no server nope"),
                          (("export", "--ranks", "5000"), "nothing to export"),
                          (("export", "--format", "otf2", "--servers", "nope"), "--servers: no server nope")):
        res = cli(command[0], small, "-o", tmp_path / "x", *command[1:])
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1 and says in res.stderr, res.stderr
        assert not (tmp_path / "x").exists()


# ----------------------------------------------------------------------------- in the browser

def _chromium(tmp, *args) -> str:
    assert CHROMIUM, "chromium is required (apt-get install chromium)"
    result = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp / 'profile'}", *args],
                            capture_output=True, text=True, timeout=120)
    return result.stdout


class _Page:
    """A page open in headless Chromium (DevTools protocol)."""

    def __init__(self, html, profile, timeout: float = 60):
        from tests.cdp import Browser

        self.b = Browser(CHROMIUM, [f for f in FLAGS if not f.startswith("--virtual")], str(profile))
        self.b.open(html.as_uri())
        self.b.wait_for("document.body.dataset.ready === '1' || document.body.dataset.error", timeout)
        assert self.js("document.body.dataset.error || ''") == ""

    def js(self, expr: str):
        return self.b.js(expr)

    def top(self) -> float:
        return self.js("document.getElementById('tl').getBoundingClientRect().top")

    def screenshot(self, path) -> None:
        path.write_bytes(base64.b64decode(self.b.send("Page.captureScreenshot", format="png")["data"]))

    def close(self) -> None:
        self.b.close()


@pytest.fixture
def open_page(tmp_path):
    pages = []

    def opener(html, **kw):
        pages.append(_Page(html, tmp_path / f"cdp{len(pages)}", **kw))
        return pages[-1]

    yield opener
    for p in pages:
        p.close()


def _view(db, out, *args) -> dict:
    import json

    view = cli("view", db, "-o", out, "--json", *args)
    assert view.returncode == 0, view.stderr
    return json.loads(view.stdout)


#: arrows that start on another lane than their call's: from an aggregator's request
FROM_AGGREGATORS = ("(() => { const A = __callid.A, C = __callid.C; let n = 0; "
                    "for (let k = 0; k < A.n; k++) if (A.lane[k] !== C.lane[A.call[k]]) n++; return n; })()")
#: every drawn arrow starts no later than it ends (time and x), and some are drawn: [bad, drawn]
ARROWS_FORWARD = ("(() => { const a = __callid.drawnArrows; "
                  "return [a.filter(d => d.t0 > d.t1 || d.x0 > d.x1 + 1e-6).length, a.length]; })()")



@pytest.fixture(scope="module")
def small_page(small, tmp_path_factory):
    """The small trace's page, all of it in full detail."""
    html = tmp_path_factory.mktemp("small_page") / "timeline.html"
    assert _view(small, html)["summarised_events"] == 0
    return html


@pytest.mark.browser
@needs_chromium
def test_axis_ticks_follow_the_zoom(small_page, open_page, tmp_path):
    page = open_page(small_page)
    before = page.js("__callid.ticks.map(t => t.label)")
    assert len(before) >= 5 and all(t.endswith(" ms") for t in before)
    xs = page.js("__callid.ticks.map(t => t.x)")
    assert all(b > a for a, b in zip(xs, xs[1:]))
    x, y = 700, page.top() + 300
    for _ in range(4):  # the wheel, as a user zooms
        window = page.js("document.body.dataset.window")
        page.b.mouse("mouseWheel", x, y, deltaX=0, deltaY=-1500)
        page.b.wait_for(f"document.body.dataset.window !== '{window}'")
    after = page.js("__callid.ticks.map(t => t.label)")
    assert len(after) >= 5 and len(set(after)) == len(after) and not set(after) & set(before)
    assert {t.split()[-1] for t in after} != {"ms"}  # finer units: µs (or ns) ticks
    page.screenshot(tmp_path / "zoomed.png")
    # deep in a long run: the ticks count from a base shown once, in ns
    page.js("__callid.setView(31415926000, 31415926200)")
    axis = page.js("__callid.axis")
    assert axis["base"].endswith("s +") and axis["unit"] == "ns"
    assert all(t["label"].startswith("+") and t["label"].endswith(" ns") for t in axis["ticks"])


#: a function name that runs script wherever a page parses it as HTML
HOSTILE = '<img src=x onerror="document.body.dataset.pwned = 1">'


@pytest.mark.browser
@needs_chromium
def test_names_from_a_log_are_shown_as_text_never_run(tmp_path, open_page):
    """A client log whose calls are named with markup: the legend shows the name, no script runs."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = tmp_path / "synth"
    assert cli("synth", "--ranks", "2", "--calls", "50", "--fanout", "2", "-d", out).returncode == 0
    log = pq.read_table(out / "client.parquet")
    funcs = log.column("func").to_pylist()
    names = [HOSTILE if f == "MPI_File_write_at" else f for f in funcs]
    assert names != funcs
    column = log.schema.get_field_index("func")
    log = log.set_column(column, log.schema.field(column), pa.array(names, log.schema.field(column).type))
    pq.write_table(log, out / "client.parquet")
    db = out / "m.duckdb"
    merged = cli("merge", out / "client.parquet", out / "server.parquet", "-o", db)
    assert merged.returncode == 0, merged.stderr
    html = tmp_path / "timeline.html"
    _view(db, html)
    page = open_page(html)
    assert page.js("document.body.dataset.pwned || ''") == ""
    assert page.js("document.querySelectorAll('#legend img').length") == 0
    assert HOSTILE in page.js("document.getElementById('legend').textContent")


@pytest.mark.browser
@needs_chromium
def test_empty_lanes_start_collapsed_and_a_lane_collapses_and_hides(small, open_page, tmp_path):
    # a 2 µs window: a few ranks start a call in it, the other lanes are empty
    t = query(small, "SELECT min(t_rel_ns) FROM calls WHERE rank = 0 AND t_rel_ns > 20000000")[0][0]
    html = tmp_path / "window.html"
    _view(small, html, "--window", f"{t}ns:{t + 2000}ns")
    page = open_page(html)
    lanes = page.js("__callid.lanes.map(l => [l.label, l.detail + l.summary, l.collapsed])")
    empty = [label for label, n, _ in lanes if n == 0]
    assert empty and "rank 0" not in empty
    assert all(collapsed == (n == 0) for _, n, collapsed in lanes)
    i = [label for label, _, _ in lanes].index("rank 0")
    _, h = page.js(f"__callid.laneRect({i})")
    assert h == 20

    def click_label(x: float) -> None:
        top, height = page.js(f"__callid.laneRect({i})")
        page.b.mouse("mousePressed", x, page.top() + top + height / 2, button="left", clickCount=1)
        page.b.mouse("mouseReleased", x, page.top() + top + height / 2, button="left", clickCount=1)

    click_label(40)  # the name: collapse
    assert page.js(f"__callid.lanes[{i}].collapsed") and page.js(f"__callid.laneRect({i})")[1] == 7
    page.screenshot(tmp_path / "collapsed.png")
    click_label(40)  # again: expand
    assert page.js(f"__callid.laneRect({i})")[1] == 20
    click_label(170 - 7)  # its x: hide
    assert page.js(f"__callid.laneRect({i})") is None
    page.js("document.getElementById('unhide').click()")
    assert page.js(f"__callid.laneRect({i})")[1] == 20


@pytest.mark.browser
@needs_chromium
def test_calls_group_into_composites_by_function_file_or_phase(small_page, open_page, tmp_path):
    """The thesis' composites: a rank's consecutive calls of one function (or on one file, or of one I/O
    phase) drawn as one bar, counted, hovered; the legend's filters apply to what is grouped."""
    page = open_page(small_page)
    choose = ("m => { const s = document.getElementById('group'); s.value = m; "
              "s.dispatchEvent(new Event('change')); return document.body.dataset.group; }")
    page.js(f"window.choose = {choose}")
    # every call in exactly one composite; on a rank, the next composite has another function (or file), and
    # each spans its calls: [calls, composites, bad neighbours, calls outside their composite]
    check = """(() => { const C = __callid.C, G = __callid.composites();
      let total = 0, same = 0, outside = 0;
      for (let j = 0; j < G.lane.length; j++) {
        total += G.n[j];
        if (j + 1 < G.lane.length && G.lane[j + 1] === G.lane[j] && G.key[j + 1] === G.key[j]) same++;
      }
      for (let i = 0; i < C.n; i++) {
        if (__callid.hiddenNames.has(C.name[i])) continue;
        const v = __callid.groupOf(i);
        const j = G.lane.findIndex((l, k) => l === C.lane[i] && G.key[k] === v && G.t0[k] <= C.t0[i]
                                            && C.t0[i] + C.dur[i] <= G.t1[k]);
        if (j < 0) outside++;
      }
      return [total, G.lane.length, same, outside]; })()"""
    calls = page.js("__callid.C.n")
    assert page.js("choose('name')") == "name"
    total, groups, same, outside = page.js(check)
    assert (total, same, outside) == (calls, 0, 0) and groups < calls
    # hovering a composite of several calls says how many, of what, on which rank
    j = page.js("__callid.G.n.findIndex(n => n > 1)")
    t0, t1, lane = page.js(f"[__callid.G.t0[{j}], __callid.G.t1[{j}], __callid.G.lane[{j}]]")
    n, name = page.js(f"[__callid.G.n[{j}], __callid.meta.names[__callid.G.key[{j}]]]")
    page.js(f"__callid.setView({t0 - (t1 - t0)}, {t1 + (t1 - t0)})")
    rect = page.js(f"__callid.laneRect({lane})")
    x = page.js(f"__callid.callRect(__callid.G.first[{j}])[0]") + 2  # (where the composite begins)
    page.b.mouse("mouseMoved", x, page.top() + rect[0] + rect[1] / 2)
    tip = page.b.wait_for("document.getElementById('tip').style.display === 'block' && "
                          "document.getElementById('tip').textContent")
    assert tip.startswith(f"{n} consecutive calls of {name}  (rank "), tip
    # hiding a function in the legend groups what is left
    hidden = page.js("(() => { const C = __callid.C, k = C.name[0]; __callid.hiddenNames.add(k); "
                     "__callid.draw(); let h = 0; for (let i = 0; i < C.n; i++) if (C.name[i] === k) h++; "
                     "return h; })()")
    total, _, same, outside = page.js(check)
    assert (total, same, outside) == (calls - hidden, 0, 0)
    page.js("__callid.hiddenNames.clear(); __callid.draw()")
    # by file; and back to the calls one by one
    assert page.js("choose('file')") == "file"
    total, groups, same, outside = page.js(check)
    assert (total, same, outside) == (calls, 0, 0)
    # by I/O phase: the reads, the writes and the other calls, a rank's consecutive ones together
    assert page.js("choose('phase')") == "phase"
    total, groups, same, outside = page.js(check)
    assert (total, same, outside) == (calls, 0, 0)
    assert page.js("[...new Set(__callid.G.key)].sort()") == [0, 1]  # (the synthetic calls read or write)
    page.screenshot(tmp_path / "composites.png")
    assert page.js("choose('')") == "" and page.js("document.body.dataset.error || ''") == ""


@pytest.mark.browser
@needs_chromium
def test_overlapping_server_operations_are_drawn_on_sub_lanes(small_page, open_page, tmp_path):
    page = open_page(small_page)
    page.js("document.getElementById('lanefilter').value = 'io0'; "
            "document.getElementById('lanefilter').dispatchEvent(new Event('input'))")
    # every pair of overlapping operations of one lane: on different sub-lanes, drawn apart
    pairs, apart, example = page.js("""(() => {
      const O = __callid.O, byLane = new Map(); let pairs = 0, apart = 0, example = null;
      for (let i = 0; i < O.n; i++) {
        const l = O.lane[i]; if (!byLane.has(l)) byLane.set(l, []); byLane.get(l).push(i);
      }
      for (const [l, ops] of byLane) {
        if (__callid.laneRect(l) === null) continue;
        ops.sort((a, b) => O.t0[a] - O.t0[b]);
        for (let a = 0; a < ops.length; a++) for (let b = a + 1; b < ops.length; b++) {
          const i = ops[a], j = ops[b];
          if (O.t0[j] >= O.t0[i] + O.dur[i]) break;
          pairs++;
          const ri = __callid.opRect(i), rj = __callid.opRect(j);
          if (O.sub[i] !== O.sub[j] && (ri[3] <= rj[1] || rj[3] <= ri[1])) apart++;
          if (!example) example = [i, j, ri, rj];
        }
      }
      return [pairs, apart, example];
    })()""")
    assert pairs > 100 and apart == pairs
    i, j, ri, rj = example
    t0, t1 = page.js(f"(O => [Math.min(O.t0[{i}], O.t0[{j}]), "
                     f"Math.max(O.t0[{i}] + O.dur[{i}], O.t0[{j}] + O.dur[{j}])])(__callid.O)")
    page.js(f"__callid.setView({t0 - (t1 - t0)}, {t1 + (t1 - t0)})")  # the pair, to look at
    page.screenshot(tmp_path / "sublanes.png")


@pytest.mark.browser
@needs_chromium
def test_every_drawn_arrow_starts_no_later_than_it_ends(small, open_page, tmp_path):
    html = tmp_path / "part.html"
    got = _view(small, html, "--detail", "5000")  # detail arrows, and bundles in the summary
    assert got["detail_arrows"] > 0 and got["arrow_bundles"] > 0
    page = open_page(html)
    assert page.js(FROM_AGGREGATORS) > 0
    cut, end = got["detail_until_ns"], page.js("__callid.meta.span[1]")
    for view in (None, (0, cut * 1.2), (cut * 0.4, cut * 0.45), (cut * 0.9, end)):
        if view:
            page.js(f"__callid.setView({view[0]}, {view[1]})")
        bad, drawn = page.js(ARROWS_FORWARD)
        assert bad == 0 and drawn > 0, view
    summary = page.js("__callid.drawnArrows.filter(a => a.summary).length")
    assert summary > 0
    page.js("__callid.resetView()")
    page.screenshot(tmp_path / "arrows.png")
    # hovering a bin of the summary: what it holds, and the command that details it
    lane = page.js("__callid.lanes.findIndex(l => l.label === 'io0 trove')")
    page.js(f"__callid.setView({cut + 1_000_000}, {cut + 1_050_000})")
    top, height = page.js(f"__callid.laneRect({lane})")
    page.b.mouse("mouseMoved", 700, page.top() + top + height / 2)
    tip = page.b.wait_for("document.getElementById('tip').style.display === 'block' && "
                          "document.getElementById('tip').textContent")
    assert "io0 trove: summarised" in tip and "events, mostly trove_" in tip
    assert re.search(r"callid view \S+ --window [0-9.]+ms:[0-9.]+ms --servers io0", tip), tip


@pytest.mark.browser
@pytest.mark.mpi
@needs_chromium
def test_collective_arrows_start_at_the_aggregators_request(collective_fanin, open_page, tmp_path):
    html = tmp_path / "collective.html"
    got = _view(collective_fanin.db, html)
    arrows = collective_fanin.q("SELECT count(*) FROM arrows WHERE layer IN ('trove', 'meta')")[0][0]
    assert got["detail_arrows"] == arrows
    page = open_page(html)
    bad, drawn = page.js(ARROWS_FORWARD)
    assert bad == 0 and drawn == arrows
    assert page.js(FROM_AGGREGATORS) > 0
    page.screenshot(tmp_path / "collective.png")


# ----------------------------------------------------------------------------- the thesis demo

@pytest.fixture(scope="module")
def demo_page(demo, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("view")
    _view(demo.db, tmp / "timeline.html")
    return tmp, tmp / "timeline.html", demo.q("SELECT count(*) FROM arrows")[0][0]


@pytest.mark.browser
@pytest.mark.mpi
@needs_chromium
def test_the_page_draws_every_arrow_and_reports_first_paint(demo_page):
    tmp, html, arrows = demo_page
    text = html.read_text()
    assert "http://" not in text and "https://" not in text  # self-contained
    assert "callid report" in text and "All of it in full detail" in text
    dom = _chromium(tmp, "--dump-dom", html.as_uri())
    body = re.search(r"<body([^>]*)>", dom).group(1)
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body))
    assert attrs.get("ready") == "1"
    assert int(attrs["arrows-drawn"]) == arrows == 70
    assert float(attrs["first-draw-ms"]) > 0
    print(f"timeline drawn {attrs['first-draw-ms']} ms after page start, drawing took {attrs['draw-ms']} ms")


@pytest.mark.browser
@pytest.mark.mpi
@needs_chromium
def test_screenshot(demo_page):
    tmp, html, _ = demo_page
    shot = tmp / "timeline.png"
    _chromium(tmp, f"--screenshot={shot}", html.as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")


@pytest.mark.browser
@pytest.mark.mpi
@needs_chromium
def test_hover_click_search_hide_and_zoom_in_the_browser(demo_page, open_page):
    tmp, html, arrows = demo_page
    page = open_page(html)
    # the 1 MiB write of rank 1: hover shows its CallID, click highlights its 16 arrows
    i = page.js("(() => { const C = __callid.C, m = __callid.meta, L = __callid.lanes; "
                "for (let i = 0; i < C.n; i++) "
                "if (m.names[C.name[i]] === 'MPI_File_write' && L[C.lane[i]].label === 'rank 1') return i; "
                "return -1; })()")
    assert i >= 0
    x0, y0, x1, y1 = page.js(f"__callid.callRect({i})")
    x, y = (x0 + x1) / 2, page.top() + (y0 + y1) / 2
    page.b.mouse("mouseMoved", x, y)
    tip = page.b.wait_for("document.getElementById('tip').style.display === 'block' && "
                          "document.getElementById('tip').textContent")
    assert "MPI_File_write" in tip and "rank 1, call 3" in tip and "1048576 requested" in tip
    page.b.mouse("mousePressed", x, y, button="left", clickCount=1)
    page.b.mouse("mouseReleased", x, y, button="left", clickCount=1)
    assert page.b.wait_for("document.body.dataset.selected") == "0x000001_00000000003"
    assert page.js("document.body.dataset.arrowsHighlighted") == "16"
    # hiding rank 1's lane leaves rank 0's arrows: the metadata operation of each of its two opens, the
    # creation of the file's two datafiles by the first, their sizes asked by the second (the size at
    # open), its write and its read (16 each)
    r1 = page.js("__callid.lanes.findIndex(l => l.label === 'rank 1')")
    page.js(f"__callid.hideLane({r1})")
    assert int(page.js("document.body.dataset.arrowsDrawn")) == 38
    page.js("document.getElementById('unhide').click()")
    assert int(page.js("document.body.dataset.arrowsDrawn")) == arrows
    # search a CallID: the view centres on the call, its arrows highlighted
    page.js("__callid.resetView()")
    page.js("const s = document.getElementById('search'); s.value = '0x000001_00000000007';"
            "document.getElementById('find').click()")
    assert page.js("document.body.dataset.selected") == "0x000001_00000000007"
    assert page.js("document.body.dataset.arrowsHighlighted") == "16"
    j = page.js("__callid.find('0x000001_00000000007')")
    mid, (v0, v1) = page.js(f"__callid.C.t0[{j}] + __callid.C.dur[{j}] / 2"), page.js("__callid.view")
    assert abs((v0 + v1) / 2 - mid) < 0.05 * (v1 - v0)
    assert page.js("__callid.find('0x000009_00000000001')") == -1
    assert "not in this page's detail" in page.js("document.getElementById('status').textContent")
    # zoom with the wheel around the pointer narrows the window
    before = page.js("document.body.dataset.window")
    page.b.mouse("mouseWheel", x, y, deltaX=0, deltaY=-600)
    after = page.b.wait_for(f"document.body.dataset.window !== '{before}' && document.body.dataset.window")
    (b0, b1), (a0, a1) = (map(float, w.split(",")) for w in (before, after))
    assert a1 - a0 < (b1 - b0) / 2


@pytest.mark.browser
@pytest.mark.mpi
@needs_chromium
def test_the_legend_filters_events_and_arrows_and_an_arrow_says_what_it_links(demo_page, open_page):
    """The thesis' Fig 6.1 shows writes, reads and their Trove operations only: the legend hides the rest."""
    tmp, html, arrows = demo_page
    page = open_page(html)
    click = ("(n, shift) => { const e = [...document.querySelectorAll('#legend .pick')].find(e => "
             "e.dataset.legend === n || e.textContent === n); "
             "e.dispatchEvent(new MouseEvent('click', {shiftKey: shift})); }")
    page.js(f"window.legendClick = {click}")
    drawn = lambda: int(page.js("document.body.dataset.arrowsDrawn"))  # noqa: E731
    # hiding the opens hides their metadata arrows (6: two opens, two datafiles created, then sized)
    page.js("legendClick('MPI_File_open', false)")
    assert drawn() == arrows - 6 and page.js("document.body.dataset.hidden") == "MPI_File_open"
    # only the Trove writes among the operations: the 32 arrows of the two writes
    page.js("legendClick('trove_write', true)")
    assert drawn() == 32
    hidden = set(page.js("document.body.dataset.hidden").split(","))
    assert "trove_write" not in hidden and {"trove_read", "trove_create", "keyval_write"} <= hidden
    page.js("legendClick('[show all]', false)")
    assert drawn() == arrows and page.js("document.body.dataset.hidden") == ""
    page.js("legendClick('metadata arrows', false)")  # (the opens' keyval, create and getattr operations)
    assert drawn() == arrows - 6
    page.js("legendClick('metadata arrows', false)")
    # hovering an arrow's middle says its CallID, its call and its disk operation
    a = page.js("__callid.drawnArrows.find(a => !a.summary && a.k >= 0 && "
                "__callid.meta.names[__callid.O.name[__callid.A.op[a.k]]] === 'trove_write' && "
                "Math.hypot(a.x1 - a.x0, a.y1 - a.y0) > 30)")
    x, y = (a["x0"] + a["x1"]) / 2, page.top() + (a["y0"] + a["y1"]) / 2
    assert page.js(f"__callid.arrowAt({(a['x0'] + a['x1']) / 2}, {(a['y0'] + a['y1']) / 2})") >= 0
    page.b.mouse("mouseMoved", x, y)
    tip = page.b.wait_for("document.getElementById('tip').style.display === 'block' && "
                          "document.getElementById('tip').textContent")
    assert tip.startswith("arrow    MPI_File_write -> trove_write") and "CallID   0x00000" in tip, tip
    assert "disk offset" in tip and "bytes    65536 of the call's own" in tip, tip


# ----------------------------------------------------------------------------- at scale

@pytest.mark.slow
@pytest.mark.browser
@needs_chromium
def test_a_million_events_open_and_draw(tmp_path, open_page):
    db = _synth(tmp_path, "--ranks", "64", "--servers", "4", "--calls", "70000", "--fanout", "10",
                "--seed", "1")
    events = _events(db)
    assert events > 900_000
    got = _view(db, tmp_path / "big.html")
    assert got["detail_events"] <= 200_000 and got["detail_events"] + got["summarised_events"] == events
    assert got["bytes"] < 6 * 2**20 and got["seconds"] < 60
    page = open_page(tmp_path / "big.html", timeout=120)
    first, draw = (float(page.js(f"document.body.dataset.{k}")) for k in ("firstDrawMs", "drawMs"))
    assert first < 20_000 and draw < 2_000
    bad, drawn = page.js(ARROWS_FORWARD)
    assert bad == 0 and drawn > 0
    page.screenshot(tmp_path / "big.png")
    page.js(f"__callid.setView({got['detail_until_ns'] * 0.5}, {got['detail_until_ns'] * 0.52})")
    assert page.js(ARROWS_FORWARD)[0] == 0
    page.screenshot(tmp_path / "big_detail.png")
    print(f"{events} events: page {got['bytes'] / 2**20:.1f} MiB written in {got['seconds']} s, "
          f"first drawn {first:.0f} ms after page start, a redraw {draw:.0f} ms; screenshots in {tmp_path}")
