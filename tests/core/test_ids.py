"""CallID layout: round trips, sentinel, overflow; stamping."""

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callid_core.ids import DEFAULT_LAYOUT, THESIS_LAYOUT, CallIDError, CallIDOverflow, Layout, Stamper


@st.composite
def layout_and_id(draw):
    total = draw(st.sampled_from([32, 64]))
    layout = Layout(total, draw(st.integers(1, total - 2)))
    rank = draw(st.integers(0, layout.max_rank))
    counter = draw(st.integers(1, layout.max_counter))
    return layout, rank, counter


@given(layout_and_id())
def test_pack_unpack_format_parse_round_trip(case):
    layout, rank, counter = case
    callid = layout.pack(rank, counter)
    assert callid != layout.sentinel
    assert layout.unpack(callid) == (rank, counter)
    text = layout.format(callid)
    assert layout.parse_id(text) == callid
    assert layout.parse_id(str(callid)) == callid
    assert layout.parse_id(hex(callid)) == callid


@given(st.sampled_from(["64/23", "32/8", "64/32", "32/12"]))
def test_layout_text_round_trip(text):
    assert str(Layout.parse(text)) == text


def test_default_layout_scales_and_thesis_layout_matches():
    assert DEFAULT_LAYOUT.max_rank + 1 >= 2**20
    assert DEFAULT_LAYOUT.max_counter >= 2**40
    assert (THESIS_LAYOUT.max_rank + 1, THESIS_LAYOUT.counter_bits) == (256, 24)
    # the thesis printed 0x1000003 for the third call of rank 1
    assert THESIS_LAYOUT.pack(1, 3) == 0x1000003


def test_format_separates_rank_and_counter():
    assert DEFAULT_LAYOUT.format(DEFAULT_LAYOUT.pack(1, 3)) == "0x000001_00000000003"
    assert THESIS_LAYOUT.format(THESIS_LAYOUT.pack(1, 3)) == "0x01_000003"


def test_sentinel_is_all_ones_and_formats_as_none():
    assert THESIS_LAYOUT.sentinel == 0xFFFFFFFF
    assert DEFAULT_LAYOUT.sentinel == 2**64 - 1
    assert DEFAULT_LAYOUT.format(DEFAULT_LAYOUT.sentinel) == "none"
    assert DEFAULT_LAYOUT.parse_id("none") == DEFAULT_LAYOUT.sentinel


def test_overflow_is_an_error_not_a_wrap_around():
    with pytest.raises(CallIDOverflow, match="rank 256"):
        THESIS_LAYOUT.pack(256, 1)
    with pytest.raises(CallIDOverflow, match="counter"):
        THESIS_LAYOUT.pack(0, 1 << 24)
    with pytest.raises(CallIDOverflow):
        THESIS_LAYOUT.pack(0, 0)
    with pytest.raises(CallIDOverflow):
        Stamper(300, THESIS_LAYOUT)


def test_stamper_counts_from_one_and_stops_at_overflow():
    layout = Layout(32, 29)  # 3 counter bits: counters 1..6, 7 is kept for the sentinel
    stamper = Stamper(5, layout)
    ids = [stamper.next() for _ in range(6)]
    assert [layout.unpack(i) for i in ids] == [(5, c) for c in range(1, 7)]
    with pytest.raises(CallIDOverflow):
        stamper.next()


@pytest.mark.parametrize("bad", ["64", "64/0", "64/63", "48/8", "x/y"])
def test_bad_layouts_are_rejected(bad):
    with pytest.raises(CallIDError):
        Layout.parse(bad)


@pytest.mark.parametrize("bad", ["0xzz", "", "0x01_", "-3"])
def test_bad_ids_are_rejected(bad):
    with pytest.raises(CallIDError):
        THESIS_LAYOUT.parse_id(bad)


def test_stamping_is_thread_safe():
    layout = Layout(64, 23)
    stamper = Stamper(3, layout)
    out: list[list[int]] = [[] for _ in range(4)]
    threads = [threading.Thread(target=lambda o=o: o.extend(stamper.next() for _ in range(5000)))
               for o in out]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    counters = sorted(layout.unpack(i)[1] for o in out for i in o)
    assert counters == list(range(1, 20_001))
