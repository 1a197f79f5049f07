"""Clock domains with injected skew: the ``--clock-skew`` specification and the skewed readings."""

from __future__ import annotations

import numpy as np
import pytest

from callid_core.clock import Skew, SkewError, parse_skew, skewed_clock, skews_from_json, skews_to_json

SERVERS = ["meta0", "io0", "io1"]
IO = ["io0", "io1"]


def test_items_name_servers_hosts_offsets_drifts_and_wander():
    skews = parse_skew(" server:0=+40ms@30ppm, host:1=-3us@-12.5ppm,server:meta0=250ns~2ppm ",
                       SERVERS, IO, hosts=2)
    assert skews == {"io0": Skew(40e6, 30.0), "host1": Skew(-3e3, -12.5), "meta0": Skew(250.0, 0.0, 2.0)}
    assert parse_skew("") == {}
    assert parse_skew("server:1=1.5s")["io1"].offset_ns == 1.5e9


@pytest.mark.parametrize("spec, said", [
    ("server:0=40", "bad clock skew 'server:0=40'"),          # no unit
    ("disk:0=+1ms", "bad clock skew"),                         # no such kind
    ("server:0=+1ms@30", "bad clock skew"),                    # drift without ppm
    ("server:5=+1ms", "there are 2 I/O servers"),
    ("server:io9=+1ms", "no server 'io9'"),
    ("host:2=+1ms", "no host 2: the ranks are on 2 host(s)"),
    ("host:a=+1ms", "a host is given by its number"),
    ("server:0=+1ms,server:io0=+2ms", "clock io0 is given twice"),
])
def test_bad_items_are_named(spec, said):
    with pytest.raises(SkewError, match=None) as err:
        parse_skew(spec, SERVERS, IO, hosts=2)
    assert said in str(err.value)
    assert isinstance(err.value, ValueError)  # (a BadValue: the CLI reports it as a usage error)


def test_a_skewed_reading_is_offset_plus_drift_since_t0():
    skew = Skew(offset_ns=1000.0, drift_ppm=50.0)
    t0 = 10**18
    t = np.array([t0, t0 + 10**9, t0 + 10**10], dtype=np.int64)
    assert skew.local(t, t0).tolist() == [t0 + 1000, t0 + 10**9 + 1000 + 50_000, t0 + 10**10 + 1000 + 500_000]
    wander = Skew(0.0, 0.0, wander_ppm=2.0, period_ns=4e9)
    quarter = wander.delta(1e9)  # sin peaks at a quarter period: amplitude 2 ppm / (2 pi / period)
    assert quarter == pytest.approx(2e-6 * 4e9 / (2 * np.pi))


def test_json_round_trip_and_an_unskewed_clock_is_the_machine_clock():
    import time

    skews = {"io0": Skew(1.0, 2.0, 3.0, 4.0)}
    assert skews_from_json(skews_to_json(skews)) == skews
    assert skewed_clock(None, 0) is time.time_ns and skewed_clock(Skew(), 0) is time.time_ns
    ahead = skewed_clock(Skew(offset_ns=5e9), time.time_ns())
    assert 4.9e9 < ahead() - time.time_ns() < 5.1e9
