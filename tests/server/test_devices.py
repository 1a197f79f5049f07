"""The servers' modelled devices and planted faults (issue 40, item 2): the models' arithmetic on a known
sequence of operations, the faults' specifications, and real runs whose disk operations and messages take
the modelled times (bounded below: a model holds an operation back, never hurries it), and whose
straggling rank comes late to its calls."""

from __future__ import annotations

import errno
import json
import time

import duckdb
import pytest

from callid_core.config import Config
from callid_core.devices import (
    NOMINAL_LINK,
    DeviceModel,
    Fault,
    FaultError,
    faults_from_json,
    faults_to_json,
    parse_faults,
    parse_model,
    straggles,
)
from server_sim.devices import Device, Link, ModelledTrove, Pause, link_of, modelled
from tests.conftest import ROOT, callid_cmd, cli

MiB = 1 << 20


def test_a_known_sequence_of_operations_gets_the_modelled_times():
    """10 ms + bytes at 64 MB/s: 64 kB take 10 + 1 ms.  One place: operations arriving together
    queue, each ending 11 ms after the one before; two places: two at a time; a slow disk (5x) 55 ms."""
    model = DeviceModel(latency_s=0.010, bandwidth=64e6, queue=1)
    assert model.service(64_000) == pytest.approx(0.011)
    one = Device(model)
    assert [one.schedule(0.0, 64_000)[1:] for _ in range(3)] == \
        [pytest.approx((0.0, 0.011)), pytest.approx((0.011, 0.022)), pytest.approx((0.022, 0.033))]
    assert one.schedule(1.0, 0)[1:] == pytest.approx((1.0, 1.010))  # (an idle disk: latency alone)
    two = Device(DeviceModel(0.010, 64e6, queue=2))
    assert [two.schedule(0.0, 64_000)[1:] for _ in range(3)] == \
        [pytest.approx((0.0, 0.011)), pytest.approx((0.0, 0.011)), pytest.approx((0.011, 0.022))]
    assert Device(model, factor=5).schedule(0.0, 64_000)[1:] == pytest.approx((0.0, 0.055))


def test_an_operation_slower_than_the_model_keeps_its_place_busy_longer():
    device = Device(DeviceModel(latency_s=0.010), factor=2)
    place, start, end = device.schedule(0.0, 0)
    assert (start, end) == (0.0, pytest.approx(0.020))
    assert device.finished(place, start, end, real=0.050) == pytest.approx(0.100)  # 2 x its real 50 ms
    assert device.schedule(0.0, 0)[1] == pytest.approx(0.100)  # the next waits for it


def test_a_link_carries_one_message_at_a_time_each_way():
    """10 ms + bytes at 10 MB/s: two messages of 100 kB that came in together are served 20 and 40 ms
    later (as bounds: never earlier); a reply going out meanwhile has its own direction (20 ms)."""
    link = Link(DeviceModel(latency_s=0.010, bandwidth=10e6))
    t0 = time.monotonic()
    link.inbound(100_000)
    t1 = time.monotonic()
    link.inbound(0)  # (an empty message: the latency alone)
    t2 = time.monotonic()
    assert t1 - t0 >= 0.020 - 1e-6 and t2 - t1 >= 0.010 - 1e-6
    both = Link(DeviceModel(latency_s=0.020))
    t0 = time.monotonic()
    both.outbound(0)
    both.inbound(0)  # (the other direction: not queued behind the reply)
    assert time.monotonic() - t0 < 0.040 + 0.015
    assert link_of(None, None) is None and link_of(None, Fault(disk_factor=3)) is None
    slow = link_of(None, Fault(link_factor=20))
    assert slow is not None and slow._in.model == NOMINAL_LINK and slow._in.factor == 20


def test_a_pause_holds_requests_until_its_end():
    """A request before the pause passes at once; one in it waits until its end (as a bound: never
    earlier)."""
    t = [100.0]
    assert Pause(start=1.0, length=2.0, clock=lambda: t[0]).wait() is None and t[0] == 100.0
    pause = Pause(start=0.0, length=0.05)
    ends = time.monotonic() + 0.05 - 1e-6
    pause.wait()
    assert time.monotonic() >= ends


def test_specifications_are_parsed_and_bad_ones_refused():
    assert parse_model("latency=5ms,bandwidth=200MiB/s,queue=4") == DeviceModel(0.005, 200 * MiB, 4)
    assert parse_model("") is None
    faults = parse_faults(["io1:disk=slow:20x", "meta0:load=3x", "io0:pause=2s@1s", "io1:full=16MiB"],
                          ["meta0", "io0", "io1"])
    assert faults["io1"].disk_factor == 20 and faults["io1"].full_bytes == 16 * MiB
    assert faults["meta0"].meta_factor == 3 and faults["io0"].pause == (1.0, 2.0)
    assert faults_from_json(json.loads(json.dumps(faults_to_json(faults)))) == faults
    more = parse_faults(["io0:link=slow:8x", "rank3:straggle=50ms"], ["meta0", "io0"], ranks=4)
    assert more["io0"].link_factor == 8 and straggles(more) == {3: pytest.approx(0.050)}
    for bad in ["latency=-1ms", "queue=0", "speed=1", "bandwidth=fast"]:
        with pytest.raises(FaultError):
            parse_model(bad)
    for bad in ["io9:disk=slow:2x", "io0:disk=slow:0.5x", "io0:disk=slow", "io0:pause=0s", "io0:melt=1",
                "io0:full=lots", "io0:straggle=1s", "rank1:disk=slow:2x", "rank4:straggle=1s",
                "rank0:straggle=0s", "rank0:straggle=2min"]:
        with pytest.raises(FaultError):
            parse_faults([bad], ["meta0", "io0"], ranks=4)


def test_the_default_is_the_real_disk_unwrapped(tmp_path):
    """No model, no fault: the server's Trove and metadata store are themselves (today's behaviour)."""
    trove, meta = object(), object()
    assert modelled(trove, meta, None, None) == (trove, meta)
    assert modelled(trove, meta, None, Fault(pause=(1.0, 1.0))) == (trove, meta)
    assert link_of(None, None) is None
    config = Config("r", [], str(tmp_path))
    assert config.disk_model == {} and config.net_model == {} and config.faults == {}


class _Trove:
    def write_list(self, handle, segments, data=None):
        return sum(n for _, n in segments)


def test_a_full_server_refuses_writes_beyond_its_bytes():
    full = ModelledTrove(_Trove(), Device(DeviceModel()), full_bytes=100)
    assert full.write_list(1, [(0, 60)]) == 60
    with pytest.raises(OSError) as err:
        full.write_list(1, [(60, 41)])
    assert err.value.errno == errno.ENOSPC
    assert full.write_list(1, [(60, 40)]) == 40  # (what was refused was not counted)


@pytest.mark.mpi
@pytest.mark.slow
def test_a_run_takes_the_modelled_times_and_records_the_truth(tmp_path):
    """mpi-io-test on 2 servers, a disk of 20 ms + bytes at 100 MiB/s, io1's disk 5x slower: every
    disk operation of io0 takes at least its modelled time, of io1 at least 5 times it; the run's
    configuration holds the model and the fault."""
    out = tmp_path / "out"
    res = callid_cmd("run", "-n", 2, "--servers", 2, "-d", out, "--disk-model",
                     "latency=20ms,bandwidth=100MiB/s", "--fault", "io1:disk=slow:5x",
                     ROOT / "examples" / "mpi_io_test.py", "-b", "64KiB", "-i", 2)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = duckdb.sql(f"""SELECT server, op, size, t_end - t_start AS ns FROM '{out}/server.parquet'
                          WHERE layer = 'trove'""").fetchall()
    assert {s for s, *_ in rows} == {"io0", "io1"}
    for server, op, size, ns in rows:
        modelled_ns = (0.020 + (size or 0) / (100 * MiB)) * 1e9 * (5 if server == "io1" else 1)
        assert ns >= modelled_ns * 0.999, (server, op, size, ns)
    merged = cli("merge", out / "client.parquet", out / "server.parquet", "-o", out / "m.duckdb")
    assert merged.returncode == 0, merged.stderr
    with duckdb.connect(str(out / "m.duckdb"), read_only=True) as con:
        (config,) = con.execute("SELECT value FROM run WHERE key = 'server.config'").fetchone()
    config = json.loads(config)
    assert config["disk_model"] == {"latency_s": 0.02, "bandwidth": 100.0 * MiB, "queue": 1}
    assert config["faults"]["io1"]["disk_factor"] == 5.0
    assert config["faults"]["io1"]["said"] == ["io1:disk=slow:5x"]


@pytest.mark.mpi
@pytest.mark.slow
def test_a_run_takes_the_modelled_link_times(tmp_path):
    """Links of 5 ms + bytes at 50 MiB/s, io1's 4x slower: an rpc crosses its server's link at least twice
    (the request in, the reply out), so every rpc to io0 takes at least 10 ms, to io1 at least 40 ms,
    and a 64 KiB write's at least its bytes' time more; the configuration holds the model."""
    out = tmp_path / "out"
    res = callid_cmd("run", "-n", 2, "--servers", 2, "-d", out, "--net-model",
                     "latency=5ms,bandwidth=50MiB/s", "--fault", "io1:link=slow:4x",
                     ROOT / "examples" / "mpi_io_test.py", "-b", "64KiB", "-i", 2)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = duckdb.sql(f"""SELECT server, op, size, t_end - t_start FROM '{out}/client.parquet'
                          WHERE kind = 'rpc' AND server IN ('io0', 'io1')""").fetchall()
    assert {s for s, *_ in rows} == {"io0", "io1"} and any(op == "io" for _, op, *_ in rows), rows
    for server, op, size, ns in rows:
        factor = 4 if server == "io1" else 1
        floor = factor * (2 * 0.005 + ((size or 0) / (50 * MiB) if op == "io" else 0))
        assert ns >= floor * 1e9 * 0.999, (server, op, size, ns)
    config = json.loads((out / "fs.json").read_text())
    assert config["net_model"] == {"latency_s": 0.005, "bandwidth": 50.0 * MiB, "queue": 1}
    assert config["faults"]["io1"]["link_factor"] == 4.0


@pytest.mark.mpi
@pytest.mark.slow
def test_a_straggling_rank_comes_late_and_the_others_wait_for_it(tmp_path):
    """rank 1 comes 300 ms late to each MPI-IO call: each of its calls starts at least 300 ms after its
    previous one ended; rank 0 waits for it in the collective write (at least 250 ms)."""
    out = tmp_path / "out"
    res = callid_cmd("run", "-n", 2, "-d", out, "--fault", "rank1:straggle=300ms",
                     ROOT / "examples" / "collective_write.py", "--block", "64KiB", "--blocks", 2)
    assert res.returncode == 0, res.stderr[-3000:]
    gaps = duckdb.sql(f"""SELECT rank, func, t_start - lag(t_end) OVER (PARTITION BY rank ORDER BY t_start)
                          FROM '{out}/client.parquet' WHERE kind = 'call'""").fetchall()
    assert all(gap >= 0.3e9 for rank, _, gap in gaps if rank == 1 and gap is not None), gaps
    ((waited,),) = duckdb.sql(f"""SELECT max(t_end - t_start) FROM '{out}/client.parquet' WHERE kind = 'call'
                                  AND rank = 0 AND func = 'MPI_File_write_all'""").fetchall()
    assert waited >= 0.25e9


def test_bad_device_options_are_usage_errors(tmp_path):
    for args, said in [(["--disk-model", "queue=0"], "--disk-model"),
                       (["--net-model", "bandwidth=fast"], "--net-model"),
                       (["--fault", "rank2:straggle=1s"], "no rank 2"),
                       (["--fault", "io7:disk=slow:2x"], "no server"),
                       (["--fault", "io0:melt=1"], "--fault")]:
        res = cli("run", "-d", tmp_path / "o", *args, ROOT / "examples" / "mpi_io_test.py")
        assert res.returncode == 2 and said in res.stderr, res.stderr


@pytest.mark.mpi
@pytest.mark.slow
def test_a_full_server_fails_the_write_that_overflows_it(tmp_path):
    """io0 full after 64 KiB: the write that would take it beyond fails with MPI_ERR_NO_SPACE (logged
    with its call), the run says which rank failed and why, and the logs are kept."""
    out = tmp_path / "out"
    res = callid_cmd("run", "-n", 2, "--servers", 2, "-d", out, "--fault", "io0:full=64KiB",
                     ROOT / "examples" / "mpi_io_test.py", "-b", "64KiB", "-i", 2)
    assert res.returncode != 0 and "ENOSPC" in res.stderr and "Traceback" not in res.stderr
    errors = duckdb.sql(f"""SELECT func, error FROM '{out}/client.parquet'
                            WHERE kind = 'call' AND error IS NOT NULL""").fetchall()
    assert len(errors) == 1 and errors[0][0] == "MPI_File_write_at"
    assert errors[0][1].startswith("MPI_ERR_NO_SPACE")


@pytest.mark.mpi
@pytest.mark.slow
def test_a_paused_server_holds_the_requests_that_reach_it(tmp_path):
    """io0 paused for 1.5 s from its first request (the opens' create_dfile): a request to it waits that
    long (the run's pings and log requests are not held: the run starts and ends)."""
    out = tmp_path / "out"
    res = callid_cmd("run", "-n", 2, "--servers", 2, "-d", out, "--fault", "io0:pause=1500ms",
                     ROOT / "examples" / "mpi_io_test.py", "-b", "64KiB", "-i", 2)
    assert res.returncode == 0, res.stderr[-3000:]
    ((longest,),) = duckdb.sql(f"""SELECT max(t_end - t_start) FROM '{out}/client.parquet'
                                   WHERE kind = 'rpc' AND server = 'io0'""").fetchall()
    assert longest >= 1.5e9 * 0.999


def test_a_replay_refuses_a_bad_fault_before_it_writes_anything(tmp_path):
    from bench.darshan_log import synthetic_dxt_log

    log = tmp_path / "app.darshan"
    synthetic_dxt_log(log, ranks=2, accesses=2, size=4096)
    res = cli("replay", log, "-d", tmp_path / "rp", "--fault", "io9:disk=slow:2x")
    assert res.returncode == 2 and "--fault" in res.stderr and "no server 'io9'" in res.stderr, res.stderr
    res = cli("replay", log, "-d", tmp_path / "rp", "--fault", "rank5:straggle=1s")
    assert res.returncode == 2 and "rank 5 makes no call" in res.stderr, res.stderr
    assert not (tmp_path / "rp").exists()


@pytest.mark.mpi
@pytest.mark.slow
def test_a_straggling_source_rank_comes_late_in_a_replay(tmp_path):
    """A replay (as fast as possible) of a log of 2 ranks with rank 1 straggling by 200 ms: each of
    rank 1's calls starts at least 200 ms after its previous one ended, and rank 0 waits for it in
    the collectives (at least 150 ms each, after its first)."""
    from bench.darshan_log import synthetic_dxt_log

    log = tmp_path / "app.darshan"
    synthetic_dxt_log(log, ranks=2, accesses=3, size=4096)
    res = callid_cmd("replay", log, "-d", tmp_path / "rp", "--fault", "rank1:straggle=200ms")
    assert res.returncode == 0, res.stderr[-3000:]
    calls = duckdb.sql(f"""SELECT rank, collective, t_end - t_start AS ns,
                                  t_start - lag(t_end) OVER (PARTITION BY rank ORDER BY t_start) AS gap
                           FROM '{tmp_path}/rp/client.parquet' WHERE kind = 'call'""").fetchall()
    assert all(gap >= 0.2e9 for rank, _, _, gap in calls if rank == 1 and gap is not None), calls
    waits = [ns for rank, collective, ns, gap in calls if rank == 0 and collective and gap is not None]
    assert len(waits) >= 5 and min(waits[1:]) >= 0.15e9, calls
