"""MPI-IO semantics on the simulated file system, each checked by reading the data back."""

from __future__ import annotations

import textwrap

import duckdb
import pytest

from tests.conftest import callid_cmd, cli

pytestmark = pytest.mark.mpi

APP = textwrap.dedent('''
    import array
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    RW, CREATE = MPI.MODE_RDWR, MPI.MODE_CREATE

    def error_class(fn):
        try:
            fn()
        except MPI.Exception as exc:
            return exc.Get_error_class()

    # 1. a strided view: each rank owns every size-th block of B ints (vector filetype)
    K, B = 50, 3
    own = MPI.File.Open(MPI.COMM_SELF, f"/pvfs2/own{rank}", RW | CREATE)  # a collective of one
    own.Write_all(b"only mine")
    own.Close()
    fh = MPI.File.Open(comm, "/pvfs2/strided", RW | CREATE)
    ftype = MPI.INT.Create_vector(K, B, B * size).Create_resized(0, B * size * 4 * K).Commit()
    fh.Set_view(rank * B * 4, MPI.INT, ftype)
    mine = array.array("i", [rank * 100000 + i for i in range(K * B)])
    fh.Write_all(mine)
    fh.Sync()  # sync-barrier-sync: the others' data is visible (Sync is collective)
    fh.Set_view(0, MPI.BYTE, MPI.BYTE)
    whole = array.array("i", [0] * (K * B * size))
    fh.Read_at_all(0, whole)
    expect = [r * 100000 + k * B + j for k in range(K) for r in range(size) for j in range(B)]
    assert list(whole) == expect
    # a strided read through the view, non-blocking
    fh.Set_view(rank * B * 4, MPI.INT, ftype)
    back = array.array("i", [0] * (K * B))
    status = MPI.Status()
    MPI.Request.Waitall([fh.Iread_at(0, back)], [status])
    assert back == mine and status.Get_count(MPI.INT) == K * B
    ftype.Free()
    fh.Close()

    # 2. shared file pointer: records from every rank, none lost or overlapping
    M = 20
    fh = MPI.File.Open(comm, "/pvfs2/shared", RW | CREATE)
    for j in range(M):
        fh.Write_shared(f"r{rank:03d}j{j:04d}\\n".encode())
    fh.Sync()
    assert fh.Get_position_shared() == M * size * 10
    fh.Write_ordered(f"o{rank:03d}x0000\\n".encode())
    fh.Sync()
    data = bytearray(M * size * 10 + size * 10)
    fh.Read_at(0, data)
    records = [data[i:i + 10].decode() for i in range(0, len(data), 10)]
    assert sorted(records[:M * size]) == sorted(f"r{r:03d}j{j:04d}\\n" for r in range(size) for j in range(M))
    assert records[M * size:] == [f"o{r:03d}x0000\\n" for r in range(size)]
    fh.Close()

    # 3. split collectives
    fh = MPI.File.Open(comm, "/pvfs2/split", RW | CREATE)
    fh.Write_at_all_begin(rank * 8, b"%08d" % rank)
    fh.Write_at_all_end(b"")
    fh.Sync()
    fh.Seek(((rank + 1) % size) * 8)
    got = bytearray(8)
    fh.Read_all_begin(got)
    fh.Read_all_end(got, status)
    assert got == b"%08d" % ((rank + 1) % size) and status.Get_count(MPI.BYTE) == 8
    assert error_class(lambda: fh.Read_all_end(got)) is not None
    assert error_class(lambda: fh.Write_at_all_end(got)) is not None  # (an _at end: no offset argument)
    assert error_class(lambda: fh.Read_at_all_end(got, status)) is not None
    info = fh.Get_info()
    assert int(info.Get("striping_factor")) >= 1 and info.Get("cb_buffer_size") is not None
    fh.Close()

    # 4. DELETE_ON_CLOSE, EXCL, APPEND
    fh = MPI.File.Open(comm, "/pvfs2/scratch", RW | CREATE | MPI.MODE_DELETE_ON_CLOSE)
    fh.Write_at(rank, b"x")
    fh.Close()
    assert error_class(lambda: MPI.File.Open(comm, "/pvfs2/scratch", MPI.MODE_RDONLY)) == MPI.ERR_NO_SUCH_FILE
    fh = MPI.File.Open(comm, "/pvfs2/excl", RW | CREATE | MPI.MODE_EXCL)
    fh.Write_at(rank * 4, b"%04d" % rank)
    fh.Close()
    assert error_class(lambda: MPI.File.Open(comm, "/pvfs2/excl", RW | CREATE | MPI.MODE_EXCL)) \\
        == MPI.ERR_FILE_EXISTS
    fh = MPI.File.Open(comm, "/pvfs2/excl", MPI.MODE_WRONLY | MPI.MODE_APPEND)
    assert fh.Get_position() == 4 * size and fh.Get_position_shared() == 4 * size
    fh.Write_ordered(b"%04d" % (rank + 50))
    fh.Close()
    fh = MPI.File.Open(comm, "/pvfs2/excl", MPI.MODE_RDONLY)
    tail = bytearray(8 * size)
    fh.Read_at(0, tail)
    first = b"".join(b"%04d" % r for r in range(size))
    assert tail == first + b"".join(b"%04d" % (r + 50) for r in range(size))
    fh.Close()
    # 5. error handlers: a Python handler is called, then the error is raised (ERRORS_RETURN style)
    seen = []
    eh = MPI.File.Create_errhandler(lambda f, code: seen.append(MPI.Get_error_class(code)))
    fh = MPI.File.Open(comm, "/pvfs2/errh", RW | CREATE)
    fh.Set_errhandler(eh)
    assert error_class(lambda: fh.Write_at(-1, b"x")) == MPI.ERR_ARG
    fh.Call_errhandler(MPI.ERR_OTHER)
    assert seen == [MPI.ERR_ARG, MPI.ERR_OTHER], seen
    fh.Set_errhandler(MPI.ERRORS_RETURN)
    fh.Close()
    eh.Free()
    print(f"rank {rank}: semantics OK", flush=True)
''')


@pytest.fixture(scope="module", params=[1, pytest.param(3, marks=pytest.mark.slow)])
def semantics(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"semantics{request.param}")
    (tmp / "app.py").write_text(APP)
    run = callid_cmd("run", "-n", request.param, "--servers", 3, "--strip-size", "256", "-d", tmp / "out",
                     tmp / "app.py")
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.count("semantics OK") == request.param
    db = tmp / "out" / "m.duckdb"
    merge = cli("merge", tmp / "out" / "client.parquet", tmp / "out" / "server.parquet", "-o", db)
    assert merge.returncode == 0, merge.stderr
    con = duckdb.connect(str(db), read_only=True)
    yield request.param, con, tmp / "out"
    con.close()


def test_every_disk_operation_is_attributed_to_its_call(semantics):
    _, con, _ = semantics
    unattributed = con.execute("""SELECT count(*) FROM server_ops s WHERE layer IN ('trove', 'meta')
        AND NOT EXISTS (SELECT 1 FROM arrows a WHERE a.server = s.server AND a.event_id = s.event_id)""")
    assert unattributed.fetchall() == [(0,)]
    funcs = {f for (f,) in con.execute("SELECT DISTINCT func FROM arrows").fetchall()}
    assert {"MPI_File_write_all", "MPI_File_read_at_all", "MPI_File_iread_at", "MPI_File_write_shared",
            "MPI_File_write_ordered", "MPI_File_write_at_all_begin", "MPI_File_read_all_begin",
            "MPI_File_close", "MPI_File_set_view"} <= funcs


def test_strided_write_logs_its_first_byte_and_its_trove_bytes_equal_the_bytes_written(semantics):
    ranks, con, _ = semantics
    rows = con.execute("""SELECT rank, file_offset, bytes FROM calls WHERE func = 'MPI_File_write_all'
                          AND file = '/pvfs2/strided' ORDER BY rank""").fetchall()
    assert rows == [(r, r * 12, 600) for r in range(ranks)]
    # each disk operation counted once, whatever the number of calls it served (fan-in)
    ops = con.execute("""SELECT sum(size) FROM (SELECT DISTINCT server, event_id, size FROM arrows
                         WHERE func = 'MPI_File_write_all' AND layer = 'trove' AND file = '/pvfs2/strided')
                      """).fetchall()[0][0]
    assert ops == 600 * ranks
    calls_with_arrows = con.execute("""SELECT count(DISTINCT callid) FROM arrows
                                       WHERE func = 'MPI_File_write_all' AND file = '/pvfs2/strided'""")
    assert calls_with_arrows.fetchall() == [(ranks,)]


def test_non_blocking_calls_and_their_completion_are_linked_by_rid(semantics):
    _, _, out = semantics
    rows = duckdb.sql(f"""SELECT kind, func, rid, bytes FROM '{out / 'client.parquet'}'
                          WHERE func = 'MPI_File_iread_at' ORDER BY rank, kind""").fetchall()
    calls = [r for r in rows if r[0] == "call"]
    waits = [r for r in rows if r[0] == "wait"]
    assert len(calls) == len(waits) >= 1
    assert [(c[2], c[3]) for c in calls] == [(w[2], w[3]) for w in waits]
    assert all(c[2] is not None and c[3] == 600 for c in calls)


def test_split_collective_begin_and_end_share_a_rid(semantics):
    _, _, out = semantics
    rows = duckdb.sql(f"""SELECT rank, func, rid FROM '{out / 'client.parquet'}'
                          WHERE func LIKE 'MPI_File_write_at_all_%' AND error IS NULL ORDER BY rank, func"""
                      ).fetchall()
    by_rank = {}
    for rank, func, rid in rows:
        by_rank.setdefault(rank, {})[func] = rid
    assert all(v["MPI_File_write_at_all_begin"] == v["MPI_File_write_at_all_end"] is not None
               for v in by_rank.values())


def test_an_end_without_its_begin_is_logged_as_the_error_it_is(semantics):
    """The program catches the error and goes on: the calls are logged with it, no offset (an _at end
    takes none: its buffer once went into the offset column and the rank's log was lost at exit)."""
    ranks, _, out = semantics
    rows = duckdb.sql(f"""SELECT func, count(*), count("offset") FROM '{out / 'client.parquet'}'
                          WHERE error LIKE '%without a matching _begin%' GROUP BY func ORDER BY func"""
                      ).fetchall()
    assert rows == [(f, ranks, 0) for f in ("MPI_File_read_all_end", "MPI_File_read_at_all_end",
                                            "MPI_File_write_at_all_end")]


def test_every_collective_call_has_one_coll_seq_on_all_ranks(semantics):
    ranks, con, _ = semantics
    rows = con.execute("""SELECT coll_seq, count(*), count(DISTINCT func), count(DISTINCT rank)
                          FROM calls WHERE collective AND file NOT LIKE '/pvfs2/own%'
                          GROUP BY coll_seq""").fetchall()
    assert len(rows) > 20
    assert all(n == ranks and funcs == 1 and rks == ranks for _, n, funcs, rks in rows)
    missing = con.execute("SELECT count(*) FROM calls WHERE collective AND coll_seq IS NULL")
    assert missing.fetchall() == [(0,)]
    own = con.execute("""SELECT count(DISTINCT coll_seq), count(*) FROM calls
                         WHERE file LIKE '/pvfs2/own%'""").fetchall()
    assert own == [(3 * ranks, 3 * ranks)]  # open, write_all, close on each rank's own file
