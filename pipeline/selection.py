"""What ``callid view`` and ``callid export`` show: a time window, ranks, files and servers, as temporary
views over a merged database, and where each arrow starts.

:func:`select_views` creates on a connection:

* ``sel_calls``: the calls of the selected ranks, on the selected files, starting in the window;
* ``sel_mpi_calls``: the MPI calls without I/O (``mpi_calls``) and the nested calls (``nested_calls``:
  the MPI-IO's own, inside a call, when the run logged them) of the selected ranks starting in the window
  (none when files are selected: they are on no file);
* ``sel_ops``: the server events of the selected servers starting in the window, and when ranks or
  files are selected, only those serving a selected call (by their CallIDs);
* ``sel_arrows``: the arrows between a selected call and a selected disk operation, each with where it
  starts: ``from_rank`` and ``from_t`` (ns, reference clock).  An arrow starts at its call's start,
  or, when an aggregator moved the call's bytes (collective buffering: the disk operation's request
  came from another rank), at the start of the aggregator's request (its ``rpcs`` row); either way no
  later than the disk operation starts.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

import duckdb

from callid_core import schema as S
from callid_core.errors import BadValue
from callid_core.units import RankSet

__all__ = ["Selection", "select_views", "window_sql"]


@dataclass(frozen=True)
class Selection:
    """A time window (ns from the run's start, ``run.start_ns``; ``inf`` end: open), ranks, file name
    patterns (fnmatch) and servers; None or empty: all."""

    window: tuple[float, float] | None = None
    ranks: RankSet | None = None
    files: tuple[str, ...] = ()
    servers: tuple[str, ...] = ()

    @property
    def everything(self) -> bool:
        return self.window is None and self.ranks is None and not self.files and not self.servers

    def describe(self) -> str:
        """One line saying what is selected (for pages and messages)."""
        parts = []
        if self.window is not None:
            lo, hi = self.window
            parts.append(f"window {lo / 1e9:g}s:{'' if hi == float('inf') else f'{hi / 1e9:g}s'}")
        if self.ranks is not None:
            parts.append(f"{len(self.ranks)} ranks")
        if self.files:
            parts.append("files " + ", ".join(self.files))
        if self.servers:
            parts.append("servers " + ", ".join(self.servers))
        return "; ".join(parts) or "everything"

    def empty(self, what: str) -> BadValue:
        """The error of a selection with nothing in it to ``what`` (export, view)."""
        return BadValue(f"nothing to {what}: no call and no server event in the selection "
                        f"({self.describe()}); widen --window, --ranks, --files or --servers")

    def too_big(self) -> BadValue:
        """The error of a selection that does not fit in memory."""
        return BadValue(f"the selection ({self.describe()}) does not fit in memory; narrow it with --window, "
                        "--ranks, --files or --servers")


def window_sql(window: tuple[float, float] | None) -> str:
    """SQL condition on ``t_rel_ns``: starting in the window (``true``: no window)."""
    if window is None:
        return "true"
    lo, hi = window
    return f"t_rel_ns >= {int(lo)}" + ("" if hi == float("inf") else f" AND t_rel_ns < {int(hi)}")


#: a row of a selected rank (once :func:`select_views` made ``sel_ranks``, the ranges of ranks)
IN_RANKS_SQL = "EXISTS (SELECT 1 FROM sel_ranks s WHERE rank BETWEEN s.lo AND s.hi)"


def select_views(con: duckdb.DuckDBPyConnection, sel: Selection) -> None:
    """Create the temporary views ``sel_calls``, ``sel_mpi_calls``, ``sel_ops`` and ``sel_arrows`` for
    ``sel``; :class:`BadValue` if it names a server the run does not have."""
    where = [window_sql(sel.window)]
    if sel.ranks is not None:
        con.execute("CREATE OR REPLACE TEMP TABLE sel_ranks AS SELECT unnest(?::INTEGER[]) AS lo, "
                    "unnest(?::INTEGER[]) AS hi", [[lo for lo, _ in sel.ranks.ranges],
                                                   [hi for _, hi in sel.ranks.ranges]])
        where.append(IN_RANKS_SQL)
    if sel.files:
        known = con.execute("SELECT DISTINCT file FROM calls WHERE file IS NOT NULL").fetchall()
        names = [n for (n,) in known if any(fnmatch.fnmatchcase(n, p) for p in sel.files)]
        con.execute("CREATE OR REPLACE TEMP TABLE sel_files AS SELECT unnest(?::VARCHAR[]) AS file", [names])
        where.append("file IN (SELECT file FROM sel_files)")
    con.execute(f"CREATE OR REPLACE TEMP VIEW sel_calls AS SELECT * FROM calls WHERE {' AND '.join(where)}")
    # the MPI calls without I/O of the ranks and the nested calls (those the MPI-IO made inside a call), in
    # the window (on no file: none when files are)
    mpi_where = "false" if sel.files else " AND ".join(w for w in where if "sel_files" not in w)
    con.execute(f"CREATE OR REPLACE TEMP VIEW sel_mpi_calls AS SELECT * FROM mpi_calls WHERE {mpi_where} "
                f"UNION ALL BY NAME SELECT * FROM nested_calls WHERE {mpi_where}")

    op_where = [window_sql(sel.window)]
    if sel.servers:
        known = {s for (s,) in con.execute("SELECT DISTINCT server FROM server_ops").fetchall()}
        unknown = sorted(set(sel.servers) - known)
        if unknown:
            raise BadValue(f"--servers: no server {', '.join(unknown)} (servers: {', '.join(sorted(known))})")
        con.execute("CREATE OR REPLACE TEMP TABLE sel_servers AS SELECT unnest(?::VARCHAR[]) AS server",
                    [list(sel.servers)])
        op_where.append("server IN (SELECT server FROM sel_servers)")
    if sel.ranks is not None or sel.files:  # the events serving a selected call
        op_where.append("EXISTS (SELECT 1 FROM (SELECT unnest(o.callids) AS callid) u "
                        "SEMI JOIN sel_calls c USING (callid))")
    con.execute("CREATE OR REPLACE TEMP VIEW sel_ops AS SELECT * FROM server_ops o WHERE "
                + " AND ".join(op_where))

    con.execute(f"""
        CREATE OR REPLACE TEMP VIEW sel_arrows AS
        SELECT a.*,
               CASE WHEN o.rank >= 0 AND o.rank <> a.rank AND r.t_start IS NOT NULL THEN o.rank
                    ELSE a.rank END AS from_rank,
               CASE WHEN o.rank >= 0 AND o.rank <> a.rank AND r.t_start IS NOT NULL
                    THEN least(r.t_start, a.t_start) ELSE least(a.call_t_start, a.t_start) END AS from_t
        FROM arrows a
        SEMI JOIN sel_calls c ON c.callid = a.callid
        JOIN sel_ops o ON o.server = a.server AND o.event_id = a.event_id
        LEFT JOIN rpcs r ON r.rank = o.rank AND r.req_seq = o.req_id AND r.server = o.server
        WHERE a.layer IN ({S.DISK_LAYERS_SQL})""")

