"""The selection of a merged database as streams for the chrome and perfetto exports.

* **What is exported**: the selection's calls (``sel_calls``), the collective MPI calls without I/O
  of its ranks and window (none when files are selected), its server events (``sel_ops``) and its
  arrows (``sel_arrows``), each arrow a flow.
* **Tracks**: :mod:`pipeline.tracks` (a thread per rank and per server layer, lanes for events that
  overlap in time).
* **Where a flow starts and ends** (table ``flows`` of a scratch database).  A flow leaves a slice on
  the track of the rank the arrow starts from (``sel_arrows.from_rank``): the call itself, or for
  collective buffering the aggregator's call during which it sent the disk operation's request (the
  selected call of ``from_rank`` started last by ``from_t``, if it still runs then; else the arrow's
  own call).  Its start time ``s_ts`` is ``from_t`` clamped into that slice, its end time ``f_ts`` is
  ``s_ts`` clamped into the disk operation: both lie inside their slices, and ``s_ts <= f_ts``
  whenever the operation ends after the source slice starts (always, unless clocks are badly off:
  counted as ``arrows_backwards``).  ``at_end``: the operation starts before the source slice does,
  so a format binding flows to a slice's begin (perfetto) binds its end to the operation's end.
* **Streaming**: the slices are read in order of start, in Arrow batches; the flows are read in step,
  in order of the start of the slice they leave (or reach), so each batch gets the flows it starts
  (or ends) with a join of two batches.  Memory is bounded by the batch size and DuckDB's memory
  limit (it sorts on disk beyond).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from callid_core.ids import Layout as IdLayout
from pipeline.selection import Selection, select_views
from pipeline.tracks import Layout

__all__ = ["BATCH", "MEMORY_LIMIT", "Progress", "Source", "columns"]

#: rows per Arrow batch
BATCH = 65_536
#: DuckDB's memory for the sorts and the flow table (it spills beyond, into the handle's scratch
#: directory, :attr:`pipeline.merged.Merged.scratch`)
MEMORY_LIMIT = "512MB"

Progress = Callable[[int, int], None]


@dataclass
class Source:
    """The selection of an open database, ready to stream: counts, the time origin ``t0`` (ns, the
    earliest slice start), the track layout, and the flows (table ``flows`` of a scratch database file
    attached as ``scratch``: a temporary table would be seen by this connection only, and the streams
    read in step need a connection each)."""

    con: duckdb.DuckDBPyConnection
    sel: Selection
    t0: int
    n_calls: int
    n_mpi: int
    n_ops: int
    n_arrows: int
    n_backwards: int
    layout: Layout
    scratch: str
    run: dict = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Slices: calls, MPI calls without I/O and server events."""
        return self.n_calls + self.n_mpi + self.n_ops

    @classmethod
    def open(cls, con: duckdb.DuckDBPyConnection, sel: Selection, scratch_dir: str) -> Source:
        """Select, count and lay out; the flows go to a database file in ``scratch_dir``."""
        select_views(con, sel)
        n_calls, n_mpi, n_ops, t0, max_rank = con.execute("""
            WITH c AS (SELECT count(*) AS n, min(t_start) AS t, max(rank) AS r FROM sel_calls),
                 m AS (SELECT count(*) AS n, min(t_start) AS t, max(rank) AS r FROM sel_mpi_calls),
                 o AS (SELECT count(*) AS n, min(t_start) AS t FROM sel_ops)
            SELECT c.n, m.n, o.n, least(c.t, m.t, o.t), greatest(c.r, m.r) FROM c, m, o""").fetchall()[0]
        if n_calls + n_mpi + n_ops == 0:
            raise sel.empty("export")
        pairs = con.execute("SELECT DISTINCT server, layer FROM sel_ops").fetchall()
        pairs = Layout.order_server_tracks(pairs)
        layout = Layout(max(max_rank or 0, 0), pairs)
        con.execute("CREATE OR REPLACE TEMP TABLE x_tracks (server VARCHAR, layer VARCHAR, track BIGINT, "
                    "pid BIGINT)")
        if pairs:
            con.executemany("INSERT INTO x_tracks VALUES (?, ?, ?, ?)",
                            [(s, layer, i, layout.server_pid[s]) for i, (s, layer) in enumerate(pairs)])
        run = dict(con.execute("SELECT key, value FROM run").fetchall())
        ids = IdLayout.parse(run.get("layout") or "64/23")
        (rank_w, counter_w), bits = ids.hex_digits, ids.counter_bits
        con.execute(f"CREATE OR REPLACE TEMP MACRO x_hex(id) AS printf('0x%0{rank_w}x_%0{counter_w}x', "
                    f"id >> {bits}, id & {ids.counter_mask}::UBIGINT)")
        # (a unique name: connections to one database file in a process share its attachments)
        scratch = f"x_scratch_{uuid.uuid4().hex[:12]}"
        path = str(Path(scratch_dir) / f"{scratch}.duckdb").replace("'", "''")
        con.execute(f"ATTACH '{path}' AS {scratch} (READ_WRITE)")
        _flows(con, scratch)
        n_arrows, n_backwards = con.execute(
            f"SELECT count(*), count(*) FILTER (WHERE f_ts < s_ts) FROM {scratch}.flows").fetchall()[0]
        return cls(con, sel, int(t0), n_calls, n_mpi, n_ops, n_arrows, n_backwards, layout,
                   scratch, {k: run.get(k) for k in ("layout", "client.run_id", "start_ns")})

    def close(self) -> None:
        """Detach the scratch database."""
        self.con.execute(f"DETACH DATABASE IF EXISTS {self.scratch}")

    def calls(self) -> Iterator[pa.Table]:
        """The calls and MPI calls without I/O in order of start (``t_end`` at least ``t_start + 1``),
        each with the flows it starts: ``flow_ids``, ``flow_ts`` (null: none)."""
        rows = """
            SELECT rank, t_start, greatest(t_end, t_start + 1) AS t_end, func, callid, callid_hex, file,
                   file_offset, size, bytes, error
            FROM sel_calls
            UNION ALL
            SELECT rank, t_start, greatest(t_end, t_start + 1), func, NULL, NULL, NULL, NULL, NULL, NULL, NULL
            FROM sel_mpi_calls
            ORDER BY t_start"""
        flows = f"SELECT s0 AS k, src_callid, id, s_ts FROM {self.scratch}.flows ORDER BY s0, id"
        yield from self._with_flows(rows, flows, "r.callid = f.src_callid", "src_callid",
                                    "list(id ORDER BY id) AS flow_ids, list(s_ts ORDER BY id) AS flow_ts")

    def ops(self) -> Iterator[pa.Table]:
        """The server events in order of start (``track`` indexes ``layout.server_tracks``, ``pid`` its
        server's process), each with the flows it ends: ``flow_ids``, ``flow_ts``, ``flow_at_end``
        (null: none); ``callids``: its CallIDs in hex when it serves several calls."""
        rows = """
            SELECT t.track, t.pid, o.t_start, greatest(o.t_end, o.t_start + 1) AS t_end, o.server, o.layer,
                   o.op, o.callid_hex,
                   CASE WHEN len(o.callids) > 1 THEN list_transform(o.callids, lambda v: x_hex(v)) END
                       AS callids,
                   o.rank, o.req_id, o.event_id, o.handle, o.disk_offset, o.file_offset, o.size
            FROM sel_ops o JOIN x_tracks t USING (server, layer)
            ORDER BY o.t_start"""
        flows = f"SELECT d0 AS k, track, event_id, id, f_ts, at_end FROM {self.scratch}.flows ORDER BY d0, id"
        lists = ("list(id ORDER BY id) AS flow_ids, list(f_ts ORDER BY id) AS flow_ts, "
                 "list(at_end ORDER BY id) AS flow_at_end")
        yield from self._with_flows(rows, flows, "r.track = f.track AND r.event_id = f.event_id",
                                    "track, event_id", lists)

    def _with_flows(self, rows_sql: str, flows_sql: str, on: str, key: str, lists: str) -> Iterator[pa.Table]:
        """Stream ``rows_sql`` (ordered by ``t_start``) in batches, each with its flows from ``flows_sql``
        (ordered by ``k``, the start of the slice they belong to), read in step: a batch takes the
        flows up to its last start, joined on ``on``, aggregated per ``key`` into ``lists``."""
        rows = self.con.sql(rows_sql).to_arrow_reader(BATCH)
        fcur, jcur = self.con.cursor(), self.con.cursor()  # (a connection per open stream)
        try:
            flows = _Ahead(fcur.sql(flows_sql).to_arrow_reader(BATCH))
            carry = flows.schema.empty_table()
            for batch in rows:
                if not batch.num_rows:
                    continue
                table = pa.Table.from_batches([batch])
                fl = pa.concat_tables([carry, flows.upto(batch.column("t_start")[-1].as_py())])
                yield _join(jcur, table, fl, on, key, lists)
                if fl.num_rows:  # (flows of slices starting when this batch's last one does, in the next)
                    carry = _unmatched(jcur, table, fl, on)
            if carry.num_rows or flows.upto(None).num_rows:
                raise RuntimeError("export: flows left without their slice")
        finally:
            fcur.close()
            jcur.close()


class _Ahead:
    """A sorted Arrow stream (key column ``k``) taken a prefix at a time."""

    def __init__(self, reader: pa.RecordBatchReader) -> None:
        self.schema = reader.schema
        self.batches = iter(reader)
        self.held: list[pa.RecordBatch] = []
        self.ended = False

    def upto(self, key: int | None) -> pa.Table:
        """The rows with ``k <= key`` not taken yet (``None``: all)."""
        while not self.ended and (not self.held or key is None
                                  or self.held[-1].column("k")[-1].as_py() <= key):
            batch = next(self.batches, None)
            if batch is None:
                self.ended = True
            elif batch.num_rows:
                self.held.append(batch)
        table = pa.Table.from_batches(self.held, self.schema)
        n = table.num_rows if key is None else int(np.searchsorted(
            table.column("k").to_numpy(), key, side="right"))
        rest = table.slice(n)
        self.held = rest.to_batches()
        return table.slice(0, n)


def _unmatched(cur: duckdb.DuckDBPyConnection, rows: pa.Table, flows: pa.Table, on: str) -> pa.Table:
    """The ``flows`` of none of the ``rows``."""
    cur.register("x_rows", rows)
    cur.register("x_fl", flows)
    try:
        return cur.sql(f"SELECT f.* FROM x_fl f ANTI JOIN x_rows r ON {on}").to_arrow_table()
    finally:
        cur.unregister("x_rows")
        cur.unregister("x_fl")


def _join(cur: duckdb.DuckDBPyConnection, rows: pa.Table, flows: pa.Table, on: str, key: str,
          lists: str) -> pa.Table:
    """``rows`` (in their order) with the lists of their ``flows``."""
    cur.register("x_rows", rows.append_column("x_i", pa.array(np.arange(rows.num_rows))))
    cur.register("x_fl", flows)
    try:
        return cur.sql(f"""
            SELECT r.* EXCLUDE (x_i), f.* EXCLUDE ({key})
            FROM x_rows r LEFT JOIN (SELECT {key}, {lists} FROM x_fl GROUP BY {key}) f ON {on}
            ORDER BY r.x_i""").to_arrow_table()
    finally:
        cur.unregister("x_rows")
        cur.unregister("x_fl")


def columns(table: pa.Table, *names: str) -> list[np.ndarray]:
    """Columns of a table as numpy arrays."""
    return [table.column(name).to_numpy() for name in names]


def _flows(con: duckdb.DuckDBPyConnection, scratch: str) -> None:
    """Table ``flows`` of the database ``scratch``: per selected arrow a flow id (from 1), its source
    slice (``src_callid``, its start ``s0``), start ``s_ts``, operation (``track``, ``event_id``, its
    start ``d0``), end ``f_ts`` and ``at_end`` (see the module)."""
    con.execute(f"""
        CREATE OR REPLACE TABLE {scratch}.flows AS
        WITH a AS (
            SELECT a.callid, a.rank, a.from_rank, a.from_t, t.track, a.event_id,
                   a.call_t_start AS c0, greatest(a.call_t_end, a.call_t_start + 1) AS c1,
                   a.t_start AS d0, greatest(a.t_end, a.t_start + 1) AS d1
            FROM sel_arrows a JOIN x_tracks t USING (server, layer)),
        s AS (  -- the aggregator's call during its request: the last started by then, if still running
            SELECT a.*, (a.from_rank <> a.rank AND c.callid IS NOT NULL
                         AND greatest(c.t_end, c.t_start + 1) > a.from_t) AS agg,
                   c.callid AS agg_callid, c.t_start AS a0, greatest(c.t_end, c.t_start + 1) AS a1
            FROM a ASOF LEFT JOIN (SELECT rank, t_start, t_end, callid FROM sel_calls
                                   WHERE callid IS NOT NULL) c
                ON c.rank = a.from_rank AND c.t_start <= a.from_t),
        b AS (
            SELECT track, event_id, d0, d1,
                   CASE WHEN agg THEN agg_callid ELSE callid END AS src_callid,
                   CASE WHEN agg THEN a0 ELSE c0 END AS s0,
                   least(greatest(from_t, CASE WHEN agg THEN a0 ELSE c0 END),
                         CASE WHEN agg THEN a1 ELSE c1 END - 1) AS s_ts
            FROM s)
        SELECT row_number() OVER () AS id, src_callid, s0, s_ts, track, event_id, d0,
               least(greatest(s_ts, d0), d1 - 1) AS f_ts, d0 < s0 AS at_end
        FROM b""")
