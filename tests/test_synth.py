"""On synthetic traces with ground truth, ``arrows`` equals the truth exactly."""

from __future__ import annotations

import duckdb
import pytest

from tests.conftest import callid_cmd


@pytest.mark.parametrize("ranks, calls, share", [(4, 2000, 0.1), (16, 8000, 0.3), (1, 500, 0.0)])
def test_arrows_equal_the_truth(tmp_path, ranks, calls, share):
    out = tmp_path / "synth"
    made = callid_cmd("synth", "-o", out, "--ranks", ranks, "--servers", 3, "--calls", calls, "--fanout", 7,
                      "--collective-share", share, "--seed", ranks)
    assert made.returncode == 0, made.stderr
    db = out / "m.duckdb"
    merged = callid_cmd("merge", out / "client.parquet", out / "server.parquet", "-o", db)
    assert merged.returncode == 0, merged.stderr
    con = duckdb.connect(str(db), read_only=True)
    truth = f"read_parquet('{out / 'truth.parquet'}')"
    q = lambda sql: con.execute(sql).fetchall()[0][0]  # noqa: E731
    assert q(f"SELECT count(*) FROM {truth}") > calls
    assert q(f"SELECT count(*) FROM (SELECT callid, server, event_id FROM arrows EXCEPT ALL "
             f"SELECT * FROM {truth})") == 0
    assert q(f"SELECT count(*) FROM (SELECT * FROM {truth} EXCEPT ALL "
             f"SELECT callid, server, event_id FROM arrows)") == 0
    # unattributed operations are present, and stay out of the arrows
    assert q("SELECT count(*) FROM server_ops WHERE len(callids) = 0") > 0
    if share:
        assert q("SELECT max(n_callids) FROM arrows") == ranks
    con.close()
