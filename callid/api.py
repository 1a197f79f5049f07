"""callid from Python: trace or replay a program, merge its logs, open the merged output and analyse it.

``import callid`` gives these names (``callid.open``, ``callid.stats``, ...); the command line is built
on the same functions.  An analysis takes a merged output opened with :func:`open` (a
:class:`~pipeline.merged.Merged`: open it once, run several analyses on it) or its path (opened for
that one call)::

    import callid
    with callid.open("callid-out/merged.duckdb") as m:
        m.arrows.limit(5)                  # any table as a DuckDB relation: .to_arrow_table(), .df(), .pl()
        m.sql("SELECT func, count(*) FROM calls GROUP BY func").fetchall()
        figures = callid.stats(m)          # what `callid stats --json` prints
        findings = callid.insights(m)      # the checks and insights run once per handle

Errors are :class:`callid_core.errors.CallidError` subclasses whose message is one line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

from callid_core.darshan_file import is_darshan_log
from callid_core.units import RankSet, parse_ranks, parse_window
from pipeline.checks import CheckResults, run_checks
from pipeline.darshan_insights import darshan_insights
from pipeline.insights import run_insights
from pipeline.merged import Merged, open_merged
from pipeline.selection import Selection
from pipeline.stats import compute_stats
from pipeline.timeline import DETAIL
from pipeline.why import explain, slowest_callid

if TYPE_CHECKING:
    from callid.replay.job import ReplayResult
    from callid.run import RunResult

__all__ = ["CheckResults", "Merged", "Selection", "check", "export", "insights",
           "merge", "merge_warnings", "open", "opened", "replay", "report", "run", "selection", "stats",
           "view", "why"]

Path = str | os.PathLike
#: a merged output: open (:func:`open`), or its path (opened for one call)
Run = Merged | Path
Step = Callable[[str], None] | None


def open(path: Path, sandbox: bool = False) -> Merged:  # (the builtin's name, as gzip.open)
    """Open the merged output at ``path`` (``callid merge``'s ``-o``) read-only; its queries reach no file
    but its own; ``sandbox``: its settings locked too (``callid sql``'s)."""
    return open_merged(path, sandbox)


@contextmanager
def opened(m: Run) -> Iterator[Merged]:
    """``m`` itself if it is open, else ``m`` opened for the block and closed after it."""
    if isinstance(m, Merged):
        yield m
        return
    with open_merged(m) as merged:
        yield merged


def run(target: str | list[str], **options: Any) -> RunResult:
    """Trace a program (``callid run``): ``target`` a script and its arguments, or ``["-m", MODULE, ...]``;
    ``options`` those of :class:`callid.run.RunOptions` (``np``, ``servers``, ``out``, ...)."""
    from callid.run import RunOptions
    from callid.run import run as do_run

    return do_run(RunOptions(target=[target] if isinstance(target, str) else list(target), **options))


def replay(source: Path, **options: Any) -> ReplayResult:
    """Replay a Darshan log or a traced run's client log (``callid replay``); ``options`` those of
    :class:`callid.replay.job.ReplayOptions` (``out``, ``procs``, ``timing``, ...)."""
    from callid.replay.job import ReplayOptions
    from callid.replay.job import replay as do_replay

    return do_replay(ReplayOptions(source=os.fspath(source), **options))


def merge(client: Path, server: Path, output: Path, **options: Any) -> dict:
    """Merge a run's client and server logs into ``output`` (``callid merge``); return the rows per
    table.  ``options``: those of :func:`pipeline.merge.merge` (``storage``, ``clock_sync``, ...)."""
    from pipeline.merge import merge as do_merge

    return do_merge(os.fspath(client), os.fspath(server), os.fspath(output), **options)


def merge_warnings(merged: Run) -> list[str]:
    """What looks wrong in a merged output, one line each (``callid merge`` prints them)."""
    from pipeline.warnings import merge_warnings as warnings

    with opened(merged) as m:
        return warnings(m)


def stats(merged: Run) -> dict:
    """Every figure of ``callid stats`` (its ``--json``)."""
    with opened(merged) as m:
        return compute_stats(m)


def check(merged: Run, codes: list[str] | None = None) -> CheckResults:
    """The usage checks (``callid check``): all, or those of ``codes``."""
    with opened(merged) as m:
        return run_checks(m, codes)


def insights(merged: Run, codes: list[str] | None = None) -> list[dict]:
    """The insights' findings (``callid insights``): all, or those of ``codes``; of a merged output, or of
    a Darshan log's counters (Drishti's insights, no replay needed)."""
    if not isinstance(merged, Merged) and is_darshan_log(merged):
        return darshan_insights(os.fspath(merged), codes)
    with opened(merged) as m:
        return run_insights(m, codes)


def why(merged: Run, callid: int | str | None = None) -> dict:
    """Why a call took its time (``callid why --json``): ``callid`` as an int, or as callid prints it
    (``0x000001_0000000003``); None: the slowest call."""
    with opened(merged) as m:
        if callid is None:
            callid = slowest_callid(m)
        elif isinstance(callid, str):
            callid = m.layout.parse_id(callid)
        return explain(m, callid)


def selection(window: str | tuple[float, float] | None = None, ranks: str | Iterable[int] | None = None,
              files: Iterable[str] = (), servers: str | Iterable[str] = ()) -> Selection:
    """What a view or an export shows: a time window (``"2.5s:3s"`` or ns from the run's start), ranks
    (``"0-15,64"`` or numbers), file name patterns (fnmatch) and servers (``"io0,io1"`` or names)."""
    if isinstance(servers, str):
        servers = servers.split(",")
    return Selection(window=parse_window(window) if isinstance(window, str) else window,
                     ranks=None if ranks is None else
                     parse_ranks(ranks) if isinstance(ranks, str) else RankSet.of(ranks),
                     files=tuple(files), servers=tuple(s.strip() for s in servers if s.strip()))


def report(runs: Run | list[Run], output: Path, on_step: Step = None) -> dict:
    """Write the report page (``callid report``) of one run, or of several side by side (the first is
    the reference)."""
    from pipeline.report import write_report

    with ExitStack() as stack:
        ms = [stack.enter_context(opened(r)) for r in (runs if isinstance(runs, list) else [runs])]
        return write_report(ms, os.fspath(output), on_step or (lambda name: None))


def view(merged: Run, output: Path, sel: Selection | None = None, detail: int = DETAIL,
         on_step: Step = None) -> dict:
    """Write the timeline page (``callid view``) of ``sel`` (see :func:`selection`; default all)."""
    from pipeline.timeline import write_timeline

    with opened(merged) as m:
        return write_timeline(m, os.fspath(output), sel, detail, on_step or (lambda name: None))


def export(merged: Run, output: Path, format: str = "chrome", sel: Selection | None = None,
           on_progress: Callable[[int, int], None] | None = None) -> dict:
    """Write the trace (``callid export``) of ``sel`` as ``chrome``, ``perfetto`` or ``otf2``."""
    from pipeline.export import write_trace

    with opened(merged) as m:
        return write_trace(m, os.fspath(output), format, sel or Selection(), on_progress)
