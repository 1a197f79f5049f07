"""The handle of a merged output: what a command begins on its second connection (beside the rest) gives
what it gives in turn, settings blocks on both connections put back, and a close stops what runs there.
On the small synthetic trace of the conftest (no MPI)."""

from __future__ import annotations

import threading

from pipeline.merged import Handle, open_merged


def _report(db) -> dict:
    from pipeline.report import compute_report

    with open_merged(str(db)) as m:
        return compute_report(m)


def test_what_runs_beside_gives_what_runs_in_turn(synthetic, monkeypatch):
    """The report (which begins the servers' busy time, the checks and the figures of the tables on the
    second connection) equals the one computed all on the first, in turn; the limit is put back."""
    beside = _report(synthetic)
    with open_merged(str(synthetic)) as m:
        before = m.rows("SELECT current_setting('memory_limit')")
        monkeypatch.setattr(Handle, "start", lambda self, key, compute: None)
        monkeypatch.setattr(Handle, "start_temp_table", lambda self, name, select: None)
        from pipeline.report import compute_report

        in_turn = compute_report(m)
        assert m.rows("SELECT current_setting('memory_limit')") == before
    assert beside == in_turn
    assert beside["checks"] and beside["insights"]  # (findings of both catalogues to compare)


def test_out_of_memory_beside_or_here_runs_again_under_duckdbs_own_limit(synthetic, monkeypatch):
    """With a limit no query can run within (1 MB), every query that fails runs again (beside: on the
    first connection; a rule: by itself; the command's own: the command again) with the same figures."""
    from pipeline import rules

    expected = _report(synthetic)
    monkeypatch.setattr(rules, "MEMORY_LIMIT", "1MB")
    assert _report(synthetic) == expected


def test_settings_blocks_on_both_connections_put_back_the_value_before_the_first(synthetic):
    """Settings are the database's: of blocks open at once on the two connections the last opened still
    open holds, and after the last the value before the first is back, in either order of closing."""
    with open_merged(str(synthetic)) as m:
        side = m._connect_side()
        limit = lambda: m.rows("SELECT current_setting('memory_limit')")[0][0]  # noqa: E731
        own = limit()
        for first_closed in ("a", "b"):
            a, b = m.settings(memory_limit="1GB"), side.settings(memory_limit="2GB")
            a.__enter__()
            b.__enter__()
            assert limit() == "1.8 GiB" and side.setting_before("memory_limit") == own
            (a if first_closed == "a" else b).__exit__(None, None, None)
            assert limit() == ("1.8 GiB" if first_closed == "a" else "953.6 MiB")
            (b if first_closed == "a" else a).__exit__(None, None, None)
            assert limit() == own
        side.close()


def test_closing_the_handle_interrupts_what_runs_beside(synthetic):
    """A close while a query runs on the second connection interrupts it and ends its thread."""
    with open_merged(str(synthetic)) as m:
        running = threading.Event()

        def forever(side):
            running.set()
            return side.rows("SELECT count(*) FROM range(1000000000000) a")
        m.start("forever", forever)
        running.wait()
        worker, _ = m._side
    assert m._memo["forever"].exception() is not None
    assert not any(t.name.startswith("callid-side") and t.is_alive() for t in threading.enumerate()
                   if t in getattr(worker, "_threads", ()))


def test_a_servers_busy_time_is_the_union_of_its_disk_operations():
    """SERVER_BUSY_SQL (the macro covered() over a server's disk operations) is the length of the union of
    their intervals, on intervals that nest, touch, repeat, start together or last no time, of servers in
    any order; operations not on a disk layer and servers with none are left out."""
    import duckdb

    from pipeline.domain import MACROS_SQL, SERVER_BUSY_SQL

    ops = [("io1", "trove", 0, 10), ("io1", "trove", 2, 5), ("io1", "meta", 10, 12), ("io1", "trove", 12, 12),
           ("io0", "trove", 5, 9), ("io0", "trove", 5, 20), ("io0", "trove", 5, 20), ("io0", "trove", 30, 31),
           ("io0", "flow", 0, 100), ("meta0", "meta", 7, 8), ("io2", "flow", 0, 50), ("a", "trove", 3, 4)]
    con = duckdb.connect()
    con.execute(MACROS_SQL)
    con.execute("CREATE TABLE server_ops (server VARCHAR, layer VARCHAR, t_start BIGINT, t_end BIGINT)")
    con.executemany("INSERT INTO server_ops VALUES (?, ?, ?, ?)", ops)
    union = {}
    for server, layer, lo, hi in ops:  # (every nanosecond of the span, counted once)
        if layer in ("trove", "meta"):
            union.setdefault(server, set()).update(range(lo, hi))
    assert dict(con.execute(SERVER_BUSY_SQL).fetchall()) == {s: len(t) for s, t in union.items()} \
        == {"io1": 12, "io0": 16, "meta0": 1, "a": 1}
