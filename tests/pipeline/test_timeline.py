"""The timeline page in real headless Chromium: every arrow drawn, first paint measured, a screenshot.

Chromium comes from Debian's ``chromium`` package, which ``.ci/run`` installs; CI sets
CALLID_REQUIRE_BROWSER=1 so a missing browser fails there instead of skipping.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.conftest import callid_cmd

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,900", "--virtual-time-budget=5000"]

pytestmark = [
    pytest.mark.browser, pytest.mark.mpi,
    pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CALLID_REQUIRE_BROWSER"),
                       reason="chromium is not installed (CI installs it)"),
]


@pytest.fixture(scope="module")
def page(demo, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("view")
    view = callid_cmd("view", demo.db, "-o", tmp / "timeline.html")
    assert view.returncode == 0, view.stderr
    return tmp, tmp / "timeline.html", demo.q("SELECT count(*) FROM arrows")[0][0]


def _chromium(tmp, *args) -> str:
    assert CHROMIUM, "chromium is required (apt-get install chromium)"
    result = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp / 'profile'}", *args],
                            capture_output=True, text=True, timeout=120)
    return result.stdout


def test_the_page_draws_one_arrow_per_arrows_row_and_reports_first_paint(page):
    tmp, html, arrows = page
    assert "http://" not in html.read_text().replace("http://www.w3.org/2000/svg", "")  # self-contained
    dom = _chromium(tmp, "--dump-dom", html.as_uri())
    body = re.search(r"<body([^>]*)>", dom).group(1)
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body))
    assert attrs.get("ready") == "1"
    assert int(attrs["arrows-drawn"]) == arrows == 66
    assert float(attrs["first-draw-ms"]) > 0
    print(f"timeline drawn {attrs['first-draw-ms']} ms after page start, first paint at "
          f"{attrs.get('first-paint-ms', '?')} ms, drawing took {attrs['draw-ms']} ms")


def test_screenshot(page):
    tmp, html, _ = page
    shot = tmp / "timeline.png"
    _chromium(tmp, f"--screenshot={shot}", html.as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")


def test_hover_click_filter_and_zoom_in_the_browser(page):
    from tests.cdp import Browser

    tmp, html, arrows = page
    browser = Browser(CHROMIUM, [f for f in FLAGS if not f.startswith("--virtual")], str(tmp / "cdp"))
    try:
        browser.open(html.as_uri())
        browser.wait_for("document.body.dataset.ready === '1'")
        # the 1 MiB write of rank 1: hover shows its CallID, click highlights its 16 arrows
        i = browser.js("E.src.findIndex((s, i) => s === 0 && D.names[E.name[i]] === 'MPI_File_write' "
                       "&& D.ranks[E.lane[i]] === 1)")
        x, y = browser.js(f"[X((E.t0[{i}] + E.t1[{i}]) / 2), laneOf({i}) * LANE + LANE / 2 + "
                          "document.getElementById('tl').getBoundingClientRect().top]")
        browser.mouse("mouseMoved", x, y)
        tip = browser.wait_for("document.getElementById('tip').style.display === 'block' && "
                               "document.getElementById('tip').textContent")
        assert "MPI_File_write" in tip and "rank 1 counter 3" in tip and "bytes   1048576" in tip
        browser.mouse("mousePressed", x, y, button="left", clickCount=1)
        browser.mouse("mouseReleased", x, y, button="left", clickCount=1)
        assert browser.wait_for("document.body.dataset.selected") == "0x000001_00000000003"
        assert browser.js("document.body.dataset.arrowsHighlighted") == "16"
        # filters: rank 0 only keeps rank 0's arrows; a CallID keeps that call's
        browser.js("const r = document.getElementById('f-rank'); r.value = '0';"
                   "r.dispatchEvent(new Event('input'))")
        # rank 0: the metadata operation of each of its two opens, its write and its read (16 each)
        assert int(browser.js("document.body.dataset.arrowsDrawn")) == 34
        browser.js("const r2 = document.getElementById('f-rank'); r2.value = '';"
                   "r2.dispatchEvent(new Event('input')); const c = document.getElementById('f-callid');"
                   "c.value = '0x000001_00000000007'; c.dispatchEvent(new Event('input'))")
        assert int(browser.js("document.body.dataset.arrowsDrawn")) == 16
        # zoom with the wheel around the pointer narrows the window
        before = browser.js("document.body.dataset.window")
        browser.mouse("mouseWheel", x, y, deltaX=0, deltaY=-600)
        after = browser.wait_for(f"document.body.dataset.window !== '{before}' "
                                 "&& document.body.dataset.window")
        (b0, b1), (a0, a1) = (map(float, w.split(",")) for w in (before, after))
        assert a1 - a0 < (b1 - b0) / 2
    finally:
        browser.close()
