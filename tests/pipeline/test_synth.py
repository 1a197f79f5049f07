"""On synthetic traces with ground truth, ``arrows`` equals the truth exactly."""

from __future__ import annotations

import json

import duckdb
import pytest

from tests.conftest import cli


@pytest.mark.parametrize("ranks, calls, share", [
    (4, 2000, 0.1), (1, 500, 0.0), pytest.param(16, 8000, 0.3, marks=pytest.mark.slow),
    pytest.param(1000, 10_000, 0.3, marks=pytest.mark.slow)])
def test_arrows_equal_the_truth(tmp_path, ranks, calls, share):
    out = tmp_path / "synth"
    made = cli("synth", "-d", out, "--ranks", ranks, "--servers", 3, "--calls", calls, "--fanout", 7,
               "--collective-share", share, "--seed", ranks)
    assert made.returncode == 0, made.stderr
    db = out / "m.duckdb"
    merged = cli("merge", out / "client.parquet", out / "server.parquet", "-o", db)
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


def test_large_traces_are_made_in_chunks_that_join_up(tmp_path):
    from pipeline.merge import merge
    from pipeline.synth import SynthOptions, synthesize

    out = tmp_path / "chunked"
    done = []
    counts = synthesize(SynthOptions(ranks=8, servers=3, calls=8000, fanout=5, collective_share=0.2,
                                     duration=60e9, misjoined=4, seed=5), out, chunk_calls=1500,
                        on_chunk=lambda k, total: done.append((k, total)))
    assert done == [(187, 1000), (374, 1000), (561, 1000), (748, 1000), (935, 1000), (1000, 1000)]
    merge(str(out / "client.parquet"), str(out / "server.parquet"), str(out / "m.duckdb"))
    con = duckdb.connect(str(out / "m.duckdb"), read_only=True)
    q = lambda sql: con.execute(sql).fetchall()  # noqa: E731
    truth = f"read_parquet('{out / 'truth.parquet'}')"
    assert q(f"SELECT count(*) FROM {truth}") == [(counts["arrows"],)]
    assert q(f"SELECT count(*) FROM (SELECT callid, server, event_id FROM arrows EXCEPT ALL "
             f"SELECT * FROM {truth})") == [(0,)]
    assert q(f"SELECT count(*) FROM (SELECT * FROM {truth} EXCEPT ALL "
             f"SELECT callid, server, event_id FROM arrows)") == [(0,)]
    # ids stay unique across chunks, each rank's calls follow each other, the duration is kept
    assert q("SELECT count(*) = count(DISTINCT (server, event_id)) FROM server_ops") == [(True,)]
    assert q("SELECT count(*) = count(DISTINCT callid), max(counter) FROM calls WHERE callid IS NOT NULL"
             ) == [(True, 1000)]
    overlaps = q("""SELECT count(*) FROM (
                        SELECT t_start, lag(t_end) OVER (PARTITION BY rank ORDER BY t_start) AS prev
                        FROM calls WHERE NOT collective) WHERE t_start < prev""")
    assert overlaps == [(0,)]
    span = q("SELECT (max(t_end) - min(t_start)) / 1e9 FROM calls")[0][0]
    assert 55 < span < 62
    assert q("SELECT count(DISTINCT coll_seq) FROM calls WHERE collective")[0][0] > 150  # in every chunk
    con.close()


def test_stats_of_many_ranks_show_the_busiest_and_say_so(tmp_path):
    out = tmp_path / "many"
    assert cli("synth", "-d", out, "--ranks", 40, "--calls", 400, "--seed", 5).returncode == 0
    db = tmp_path / "m.duckdb"
    assert cli("merge", out / "client.parquet", out / "server.parquet", "-o", db).returncode == 0
    text = cli("stats", db).stdout
    title = next(line for line in text.splitlines() if line.startswith("Time in MPI-IO per rank"))
    assert "the 16 of 40 ranks with the most time in MPI-IO, --json lists all" in title
    section = text.split(title + "\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert section[-1] == "(16 rows)"
    figures = json.loads(cli("stats", db, "--json").stdout)
    assert len(figures["time_by_rank"]) == 40
    busiest = sorted(r["io_ns"] for r in figures["time_by_rank"])[-16:]
    shown = [float(line.split()[2]) for line in section[2:-1]]
    assert sorted(shown) == [round(ns / 1e6, 3) for ns in busiest]
