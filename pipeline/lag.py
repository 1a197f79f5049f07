"""How faithful a replay's timing is: the distribution of its calls' lag.

A replayed call's ``lag`` (client log) is how long after it was due it started (``callid replay
--timing``).  Figures that rest on each rank's time (stragglers, rank imbalance in time, bandwidth by
slowest rank, ranks that stopped early) mean what they say about the source only when the replayer
kept each rank's pace: when 95 % of the calls started at most :data:`FAITHFUL_LAG_NS` late, or at most
:data:`FAITHFUL_LAG_SHARE` of the median replayed call's duration late.  Elsewhere they are not
computed, and what shows them says why.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["FAITHFUL_LAG_NS", "FAITHFUL_LAG_SHARE", "PACE_KEPT_SQL", "ReplayLag", "replay_lag"]

#: a replay keeps the ranks' pace when the 95th percentile of its calls' lag is at most this ...
FAITHFUL_LAG_NS = 1_000_000
#: ... or at most this share of the median duration of its calls
FAITHFUL_LAG_SHARE = 0.05

#: the largest 95th percentile of the lag that keeps the pace (the rule, once)
_ALLOWED = f"greatest({FAITHFUL_LAG_NS}, {FAITHFUL_LAG_SHARE} * quantile_disc(t_end - t_start, 0.5))"
_KEPT = f"quantile_disc(lag, 0.95) <= {_ALLOWED}"
_FIGURES = f"""count(lag), quantile_disc(lag, 0.5), quantile_disc(lag, 0.95), quantile_disc(lag, 0.99),
               max(lag), quantile_disc(t_end - t_start, 0.5), round({_ALLOWED}), {_KEPT}"""
#: a SQL scalar over a merged output: true unless it is a replay that did not keep the ranks' pace
PACE_KEPT_SQL = f"(SELECT coalesce({_KEPT}, true) FROM calls WHERE lag IS NOT NULL)"


@dataclass(frozen=True)
class ReplayLag:
    """The lag of a replay's calls (ns), and the median duration of those calls."""

    calls: int
    p50_ns: int
    p95_ns: int
    p99_ns: int
    max_ns: int
    median_call_ns: int
    allowed_ns: int  # the largest 95th percentile of the lag that keeps the pace
    faithful: bool  # the pace was kept

    def why_not(self) -> str | None:
        """None when the pace was kept, else why figures of per-rank time are not computed."""
        if self.faithful:
            return None
        return (f"not computed: the replay did not keep the ranks' pace (95% of its calls started up to "
                f"{self.p95_ns / 1e6:.2f} ms late, more than {self.allowed_ns / 1e6:.2f} ms; see the lag)")

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ReplayLag:
        """The lag :meth:`as_dict` gave."""
        return cls(**{k: d[k] for k in cls.__dataclass_fields__})

    def text(self) -> str:
        verdict = ("the ranks' pace kept" if self.faithful else
                   f"the ranks' pace NOT kept (more than {self.allowed_ns / 1e6:.2f} ms at the 95th "
                   f"percentile: {FAITHFUL_LAG_NS / 1e6:g} ms or {FAITHFUL_LAG_SHARE:.0%} of the median "
                   f"call, {self.median_call_ns / 1e6:.3f} ms)")
        ms = {k: f"{v / 1e6:.3f} ms" for k, v in asdict(self).items() if k.endswith("_ns")}
        return (f"lag of {self.calls} replayed calls (how long after due each started): p50 {ms['p50_ns']}, "
                f"p95 {ms['p95_ns']}, p99 {ms['p99_ns']}, max {ms['max_ns']}: {verdict}")


def replay_lag(con) -> ReplayLag | None:
    """The lag of the merged output's replayed calls (``con``: a DuckDB connection to it); None when
    no call has one (not a replay)."""
    row = con.execute(f"SELECT {_FIGURES} FROM calls WHERE lag IS NOT NULL").fetchone()
    return ReplayLag(*(int(v) for v in row[:-1]), bool(row[-1])) if row[0] else None
