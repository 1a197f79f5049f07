"""Read the accesses of a traced run (its client log) into the replay's access table.

Every data access a rank made (blocking, non-blocking, split-collective begin; explicit offset,
individual or shared pointer) becomes one access at the file ranges it touched (the logged
``region_offsets``/``region_lengths`` of a non-contiguous view, else ``[offset, offset + size)``),
collective calls grouped by their ``coll_seq``.  Nothing is inferred for files on the simulated
file system; a file on the real MPI-IO whose view was set is replayed contiguous (marked).
Calls that failed are left out.  The run's file-system layout and each file's hints come along.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa

from callid.replay.accesses import ACCESS, READ, WRITE
from callid_core.errors import InputError

__all__ = ["RunLog", "is_parquet", "read_run_log"]

#: data-access functions (the completions, *_end and waits, move nothing of their own)
DATA_ACCESS = r"^MPI_File_i?(read|write)(_at|_shared|_all|_at_all|_ordered)?(_begin)?$"


@dataclass
class RunLog:
    """What a replay takes from a traced run."""

    path: str
    ranks: int
    config: dict  # the run's configuration (callid_core.config.Config as JSON)
    accesses: pa.Table  # callid.replay.accesses.ACCESS
    file_hints: dict[str, dict[str, str]] = field(default_factory=dict)  # as opened -> hints in effect
    skipped: int = 0  # failed data accesses left out
    #: data accesses left out because where they went is not known (a shared file pointer's independent
    #: access, traced on the MPI library: its offset is the library's)
    unplaced: int = 0


def is_parquet(path: str | os.PathLike[str]) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"PAR1"
    except OSError:
        return False


def read_run_log(path: str | os.PathLike[str], config_json: str) -> RunLog:
    """The accesses of the client log at ``path`` (validated by the caller; ``config_json``: its run's
    configuration); raise :class:`InputError`."""
    path = os.fspath(path)
    con = duckdb.connect()
    try:
        quoted = path.replace("'", "''")
        # (the POSIX calls a run on the MPI library saw outside MPI-IO are not the program's MPI-IO)
        con.execute(f"""CREATE VIEW log AS SELECT * FROM read_parquet('{quoted}')
                        WHERE kind = 'call' AND origin IS DISTINCT FROM 'posix'""")
        con.execute(f"""CREATE VIEW access AS SELECT * FROM log
                        WHERE regexp_matches(func, '{DATA_ACCESS}') AND "offset" IS NOT NULL""")
        t0 = con.execute("SELECT coalesce(min(t_start), 0) FROM log").fetchall()[0][0]
        config = json.loads(config_json or "{}")
        on_sim = " OR ".join(["a.file LIKE 'pvfs2:%'"] + [
            f"a.file = '{m}' OR a.file LIKE '{m.rstrip('/')}/%'" for m in config.get("mount", [])
            if "'" not in m])
        table = con.sql(f"""
            SELECT a.rank, regexp_replace(a.file, '^pvfs2:', '') AS file,
                   CASE WHEN a.func LIKE '%write%' THEN '{WRITE}' ELSE '{READ}' END AS io,
                   a."offset", a.size AS length,
                   a.t_start - {int(t0)} AS t_start, a.t_end - {int(t0)} AS t_end,
                   a.region_offsets, a.region_lengths,
                   CASE WHEN a.collective THEN a.coll_seq END AS coll, a.func, 'callid' AS origin,
                   -- a file of the real MPI-IO whose view was set: its ranges were not logged
                   CASE WHEN NOT ({on_sim}) AND (a.rank, a.fid) IN (
                       SELECT (rank, fid) FROM log WHERE func = 'MPI_File_set_view') THEN 'contiguous'
                   END AS inferred
            FROM access a WHERE a.error IS NULL
        """).to_arrow_table()
        skipped = con.execute("SELECT count(*) FROM access WHERE error IS NOT NULL").fetchall()[0][0]
        unplaced = con.execute(f"""SELECT count(*) FROM log WHERE regexp_matches(func, '{DATA_ACCESS}')
                                   AND "offset" IS NULL AND error IS NULL""").fetchall()[0][0]
        ranks = con.execute("SELECT count(DISTINCT rank) FROM log").fetchall()[0][0]
        hints = con.execute("""
            SELECT regexp_replace(file, '^pvfs2:', ''), hints FROM log WHERE hints IS NOT NULL
                AND func IN ('MPI_File_open', 'MPI_File_set_info', 'MPI_File_set_view')
                AND rank = (SELECT min(rank) FROM log) ORDER BY t_start""").fetchall()
    except duckdb.Error as exc:
        raise InputError(f"{path}: {str(exc).splitlines()[0]}") from None
    finally:
        con.close()
    file_hints: dict[str, dict[str, str]] = {}
    for name, text in hints:
        for item in filter(None, text.split(";")):
            key, _, value = item.partition("=")
            file_hints.setdefault(name, {})[key] = value
    accesses = ACCESS.arrow(table.num_rows, {c: table[c] for c in table.column_names})
    return RunLog(path, ranks, config, accesses, file_hints, skipped, unplaced)
