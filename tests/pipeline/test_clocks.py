"""Clock alignment: recovery within the bound, each infeasibility path, and the truth of runs."""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pytest

from pipeline.clocks import _hull, _max_min_slack, bounds, fit_clock, truth_errors
from tests.conftest import EXAMPLES, cli, traced

HOUR = 3600e9


def _constraints(truth, n=20_000, seed=0, latency=5_000.0, jitter=10_000.0):
    """Lower and upper bounds of a clock whose (reference - local) is ``truth(x)`` at local ``x``:
    messages from the reference clock arrive after they were sent, and the other way round."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.integers(0, int(HOUR), 2 * n))
    lo_x, hi_x = x[0::2], x[1::2]
    lo_ref = lo_x + np.rint(truth(lo_x) - latency - rng.exponential(jitter, n)).astype(np.int64)
    hi_ref = hi_x + np.rint(truth(hi_x) + latency + rng.exponential(jitter, n)).astype(np.int64)
    return [lo_x, lo_ref, hi_x, hi_ref]


def _fit(lo_x, lo_ref, hi_x, hi_ref, model="drift"):
    lo = bounds(lo_x, lo_ref, lo_ref > lo_x)
    hi = bounds(hi_x, hi_ref, hi_ref < hi_x)
    return fit_clock("c", lo, hi, model)


def _error(fits, truth, samples=2001):
    """Max |estimate - truth| over the hour, each window on its own span."""
    worst = 0.0
    for f in fits:
        t = np.linspace(f.t_from, f.t_to, samples)
        est = f.offset_ns + f.drift_ppm * 1e-6 * (t - f.t0)
        worst = max(worst, float(np.abs(est - truth(t)).max()))
    return worst


def line(offset, ppm):
    return lambda x: offset + ppm * 1e-6 * (np.asarray(x, dtype=np.float64) - HOUR / 2)


def test_a_drifting_clock_is_recovered_within_its_guaranteed_bound():
    truth = line(-250e6, 15.0)
    (fit,) = _fit(*_constraints(truth))
    assert (fit.quality, fit.method, fit.dropped, fit.violations_after) == ("accurate", "hull", 0, 0)
    assert fit.violations_before == 20_000  # every lower bound is violated by 0.25 s before alignment
    assert fit.drift_ppm == pytest.approx(15.0, abs=0.01)
    assert _error([fit], truth) <= fit.bound_ns <= 10_000  # the bound: less than the least round trip
    assert fit.slack_ns > 0


def test_the_offset_model_fits_no_drift_and_none_moves_nothing():
    truth = line(3e6, 0.0)
    (fit,) = _fit(*_constraints(truth), model="offset")
    assert (fit.drift_ppm, fit.quality) == (0.0, "accurate")
    assert _error([fit], truth) <= fit.bound_ns
    (none,) = _fit(*_constraints(truth), model="none")
    assert (none.offset_ns, none.method, none.quality, none.violations_after) == (0.0, "identity", "none",
                                                                                 20_000)


def test_constraints_of_one_side_correct_only_as_much_as_they_ask():
    """Only upper bounds (a host whose ranks' calls are only known to start before the servers' requests
    for them): the offset is unbounded below; no correction where the bounds allow none, else the least
    they ask, never the far end of what they allow (it once went 10,000 s out); approximate, no bound."""
    lo_x, lo_ref, hi_x, hi_ref = _constraints(line(0.0, 0.0), n=200)
    for shift, expect in ((0.0, 0.0), (-40e6, None)):  # (a clock 40 ms ahead: the bounds ask for -40 ms)
        (fit,) = _fit(lo_x[:0], lo_ref[:0], hi_x, hi_ref + np.int64(shift))
        least = float(np.min(hi_ref + np.int64(shift) - hi_x))
        assert fit.offset_ns == pytest.approx(expect if expect is not None else least)
        assert (fit.quality, fit.bound_ns, fit.drift_ppm) == ("approximate", None, 0.0)
        assert fit.violations_after == 0
    (fit,) = _fit(lo_x, lo_ref + np.int64(40e6), hi_x[:0], hi_ref[:0])  # (lower bounds only: 40 ms behind)
    assert fit.offset_ns == pytest.approx(float(np.max(lo_ref + np.int64(40e6) - lo_x)))


def test_gross_outliers_are_dropped_and_do_not_move_the_estimate():
    truth = line(40e6, 30.0)
    cons = _constraints(truth)
    (clean,) = _fit(*cons)
    lo_ref = cons[1].copy()
    lo_ref[[100, 5000]] += 50_000_000  # two requests logged with a later call's CallID: 50 ms "before"
    (fit,) = _fit(cons[0], lo_ref, *cons[2:])
    assert (fit.dropped, fit.method, fit.quality, fit.violations_after) == (2, "hull", "accurate", 0)
    assert abs(fit.offset_ns - clean.offset_ns) < 1.0 and abs(fit.drift_ppm - clean.drift_ppm) < 1e-3
    assert _error([fit], truth) <= fit.bound_ns


def test_a_drift_that_changes_is_split_into_windows():
    def truth(x):  # 10 ppm for half an hour, then 25 ppm: no single line fits
        x = np.asarray(x, dtype=np.float64)
        return 1e6 + 10e-6 * x + 15e-6 * np.maximum(x - HOUR / 2, 0)
    fits = _fit(*_constraints(truth))
    assert len(fits) >= 2 and [f.win for f in fits] == list(range(len(fits)))
    assert all(f.method == "hull" and f.violations_after == 0 and f.dropped == 0 for f in fits)
    assert [f.t_from for f in fits] == sorted(f.t_from for f in fits)
    assert sum(f.constraints for f in fits) == 40_000
    assert sum(f.violations_before for f in fits) == 20_000  # the lower bounds, 1 ms ahead
    for f in fits:
        assert _error([f], truth) <= f.bound_ns


def test_a_drift_that_bends_slowly_is_split_until_the_error_is_small():
    def truth(x):  # 15 ppm, wandering by 2 ppm over the hour
        x = np.asarray(x, dtype=np.float64)
        return -250e6 + 15e-6 * x + 2e-6 / (2 * np.pi / HOUR) * np.sin(2 * np.pi * x / HOUR)
    fits = _fit(*_constraints(truth, n=100_000))
    assert len(fits) > 8
    assert sum(f.violations_after for f in fits) == 0
    assert _error(fits, truth) <= 2_000


def test_constraints_that_no_window_can_satisfy_get_a_soft_fit_that_says_so():
    # every upper bound lies 2 us below the lower bounds around it: contradictory everywhere,
    # yet no constraint is a gross outlier (the round trips look 4 us "negative")
    truth = line(0.0, 0.0)
    cons = _constraints(truth, n=2_000, latency=-2_000.0, jitter=1.0)
    (fit,) = _fit(*cons)
    assert (fit.method, fit.quality, fit.bound_ns, fit.dropped) == ("soft", "approximate", None, 0)
    assert fit.slack_ns < 0 and fit.violations_after > 0 and fit.violation_ns > 0
    assert abs(fit.offset_ns) < 2_000 and abs(fit.drift_ppm) < 1.0  # the middle of the contradiction


@pytest.mark.slow
def test_the_line_of_maximum_slack_is_the_linear_programs_optimum():
    """The line between the hulls found by bisection over their edges' slopes has the least slack it
    says over every constraint, and that slack is the optimum of the linear program (max s: a + b*lx -
    ly >= s, hy - a - b*hx >= s, |b| <= bmax) as HiGHS solves it: feasible and infeasible sets, ties in
    x, the drift free, bounded, or none."""
    from scipy.optimize import linprog

    rng = np.random.default_rng(7)
    for case in range(150):
        n, m = (int(k) for k in rng.integers(1, 300, 2))
        drift, offset, noise = rng.uniform(-2e3, 2e3), rng.uniform(-1e6, 1e6), 10 ** rng.uniform(0, 5)
        lx, hx = rng.uniform(-1, 1, n), rng.uniform(-1, 1, m)
        if case % 5 == 0:
            lx, hx = np.round(lx, 1), np.round(hx, 1)
        ly = offset + drift * lx - rng.exponential(noise, n)
        infeasible = case % 3 == 0  # (upper bounds below the lower ones)
        hy = offset + drift * hx + rng.exponential(noise, m) * (-0.3 if infeasible else 1)
        bmax = (0.0, 1e3, 5e3)[case // 3 % 3]
        li, hi = _hull(lx, ly, True), _hull(hx, hy, False)
        a, b, s = _max_min_slack(lx[li], ly[li], hx[hi], hy[hi], bmax)
        least = min((a + b * lx - ly).min(), (hy - a - b * hx).min())
        assert abs(b) <= bmax and least == pytest.approx(s, rel=1e-9, abs=1e-6)
        rows = np.r_[np.c_[-np.ones(n), -lx, np.ones(n)], np.c_[np.ones(m), hx, np.ones(m)]]
        free = (None, None)
        lp = linprog([0, 0, -1], A_ub=rows, b_ub=np.r_[-ly, hy], bounds=[free, (-bmax, bmax), free],
                     method="highs")
        assert s == pytest.approx(lp.x[2], rel=1e-7, abs=1e-6), case


@pytest.mark.slow
def test_synthetic_run_is_aligned_within_bounds_without_end_constraints_on_write_backs(tmp_path):
    out = tmp_path / "synth"
    made = cli("synth", "-d", out, "--ranks", 8, "--servers", 2, "--calls", 20_000, "--fanout", 4,
               "--duration", "10min", "--async-share", 0.5, "--ranks-per-host", 4, "--misjoined", 5,
               "--skew", "server:0=+250ms@15ppm,server:1=-40ms@-20ppm,host:1=+3ms@-12ppm", "--seed", 3)
    assert made.returncode == 0, made.stderr
    db = out / "m.duckdb"
    merged = cli("merge", out / "client.parquet", out / "server.parquet", "-o", db)
    assert merged.returncode == 0, merged.stderr
    con = duckdb.connect(str(db), read_only=True)
    q = lambda sql: con.execute(sql).fetchall()  # noqa: E731
    rows = q("SELECT clock, quality, bound_ns, violations_before, violations_after, constraints "
             "FROM clocks ORDER BY clock")
    errors = truth_errors(con)
    assert [r[0] for r in rows] == ["host0", "host1", "io0", "io1"]
    for clock, quality, bound, _, after, _ in rows[1:]:
        assert quality == "accurate" and after == 0, clock
        assert errors[clock] <= bound, clock
    assert rows[2][3] > 0 and rows[1][3] > 0  # io0 and host1 were violated before alignment
    # write-backs end after their calls on the reference clock too ...
    assert q("SELECT count(*) FROM arrows a JOIN server_ops s USING (server, event_id) "
             "WHERE s.t_end > a.call_t_end")[0][0] > 1000
    # ... and were never constraints: io0's are exactly its exchanges (two each) and one
    # "starts after its call" per call it served
    expected = q("""SELECT 2 * (SELECT count(*) FROM rpcs WHERE server = 'io0' AND clock = 'host0')
                    + (SELECT count(DISTINCT u.id) FROM server_ops s, unnest(s.callids) u(id)
                       JOIN calls c ON c.callid = u.id
                       WHERE s.server = 'io0' AND s.layer = 'req' AND c.clock = 'host0')""")[0][0]
    assert rows[2][5] == expected
    con.close()
    stats = cli("stats", db)
    assert stats.returncode == 0 and "Clocks onto host0 (drift model" in stats.stdout
    bad = cli("merge", out / "client.parquet", out / "server.parquet", "-o", db, "--clock-sync", "ntp")
    errors = [line for line in bad.stderr.splitlines() if line.startswith("Error:")]
    assert bad.returncode == 2 and errors == ["Error: Invalid value for '--clock-sync': Value error, "
                                              "'ntp' is not one of 'none', 'offset', 'drift'."]
    assert db.exists()  # the previous output is kept


@pytest.mark.mpi
@pytest.mark.slow
def test_a_real_skewed_run_is_recovered_within_the_reported_bound(tmp_path):
    skew = "server:0=+40ms@30ppm,server:1=-25ms@-20ppm"
    run = traced(tmp_path, "skew", "-n", 2, "--clock-skew", skew,
                 EXAMPLES / "mpi_io_test.py", "-b", "64KiB", "-i", 120)
    con, stats = run.con, run.stats
    errors = truth_errors(con)
    clocks = {c["clock"]: c for c in stats["clocks"]}
    assert stats["clock_sync"] == "drift"
    for io, offset_us in (("io0", -40_000), ("io1", 25_000)):
        c = clocks[io]
        assert c["quality"] == "accurate" and c["violations_after"] == 0 and c["violations_before"] > 0, c
        assert errors[io] <= c["bound_us"] * 1e3
        assert abs(c["offset_us"] - offset_us) < 1_000  # (plus 30 ppm of the time since t0)
    config = json.loads(con.execute("SELECT value FROM run WHERE key = 'client.config'").fetchone()[0])
    assert config["clock_skew"]["io0"]["drift_ppm"] == 30.0
    # on the reference clock every request arrives after it was sent, every reply before it came
    late = con.execute("SELECT count(*) FROM rpcs WHERE t_recv < t_start OR t_send > t_end").fetchone()
    assert late == (0,)
    con.close()
