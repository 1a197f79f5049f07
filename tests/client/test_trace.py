"""The per-rank trace: a call's Record and each exchange become client log rows, by column name."""

from __future__ import annotations

import pyarrow.parquet as pq

from callid.mpiio.record import Record
from callid.trace import ClientTrace

SENTINEL = (1 << 64) - 1


def test_calls_and_exchanges_become_rows(tmp_path):
    trace = ClientTrace(tmp_path, 3, "64/23", "r", clock="host1")
    trace.call(Record(5, func="MPI_File_write_at", file="/pvfs2/f", fid=1, offset=64, size=4, bytes=4,
                      collective=False, t_start=1, t_end=2))
    trace.rpc([5], "MPI_File_write_at", "io0", "io", 7, 1, 2, 10, 11, None)
    trace.rpc([5, 6], "MPI_File_write_all", "io1", "io", 8, 3, 4, None, None, "EIO")
    trace.close()
    rows = pq.read_table(sorted(tmp_path.glob("client-rank000003.*.parquet"))).to_pylist()
    assert [(r["kind"], r["callid"], r["rank"], r["clock"], r["func"]) for r in rows] == [
        ("call", 5, 3, "host1", "MPI_File_write_at"), ("rpc", 5, 3, "host1", "MPI_File_write_at"),
        ("rpc", SENTINEL, 3, "host1", "MPI_File_write_all")]
    assert (rows[0]["offset"], rows[0]["size"], rows[0]["bytes"], rows[0]["server"]) == (64, 4, 4, None)
    assert (rows[1]["server"], rows[1]["op"], rows[1]["req_seq"], rows[1]["t_recv"], rows[1]["t_send"]) == (
        "io0", "io", 7, 10, 11)
    assert rows[2]["error"] == "EIO" and rows[2]["file"] is None


def test_a_trace_switched_off_logs_nothing(tmp_path):
    trace = ClientTrace(tmp_path, 0, "64/23", "r", enabled=False)
    trace.call(Record(5, func="MPI_File_write_at", file="/pvfs2/f", size=4, t_start=1, t_end=2))
    trace.rpc([5], "MPI_File_write_at", "io0", "io", 1, 1, 2, None, None, None)
    trace.close()
    assert list(tmp_path.glob("*.parquet")) == []
