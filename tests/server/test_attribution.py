"""Per-operation attribution of a request's disk operations (server_sim.attribution), on its own."""

from hypothesis import given
from hypothesis import strategies as st

from server_sim import protocol as P
from server_sim.attribution import Attribution, apportion

CALLIDS = [11, 22, 33]


def test_operation_k_serves_exactly_the_calls_of_entry_k_with_their_bytes():
    hint = P.encode_callid_bytes([((0, 60), (2, 40)), ((1, 100),), ((0, 30), (1, 30), (2, 40))])
    assert hint == [2, 0, 60, 2, 40, 1, 1, 100, 3, 0, 30, 1, 30, 2, 40]
    att = Attribution(CALLIDS, hint)
    att.expect(3)
    assert att.share(0, 100) == ([11, 33], [60, 40], [60, 40], 0)  # the shares are their own bytes
    assert att.share(1, 100) == ([22], [100], [100], 0)
    assert att.share(2, 100) == ([11, 22, 33], [30, 30, 40], [30, 30, 40], 0)
    assert att.totals == att.own_totals == [90, 130, 80]  # per CallID of the request (req and flow events)


def test_unowned_and_shared_bytes_are_apportioned_so_an_operation_is_counted_once_beside_the_own_bytes():
    att = Attribution(CALLIDS, P.encode_callid_bytes([((0, 10), (2, 20)), ((0, 100), (1, 100)), ()]))
    att.expect(3)
    # a hole of 70 bytes, split 1:2 (the odd byte to the largest remainder), and said; own: their data
    assert att.share(0, 100) == ([11, 33], [33, 67], [10, 20], 70)
    # both read the same 100 bytes: each received all 100, each has a share of 50
    assert att.share(1, 100) == ([11, 22], [50, 50], [100, 100], 0)
    # nobody's bytes: shared by every call, equally; none of them is any call's own
    assert att.share(2, 90) == ([11, 22, 33], [30, 30, 30], [0, 0, 0], 90)
    assert att.totals == [113, 80, 97] and att.own_totals == [110, 100, 20]


def test_one_callid_owns_every_byte_and_no_callid_owns_none():
    one = Attribution([5], None)
    one.expect(2)
    assert one.share(0, 70) == (None, [70], [70], 0) and one.share(1, 30) == (None, [30], [30], 0)
    assert one.totals == one.own_totals == [100]
    assert Attribution([], None).share(0, 70) == (None, [], [], 0)


def test_a_call_owns_no_more_than_its_operation_moved():
    att = Attribution(CALLIDS[:2], P.encode_callid_bytes([((0, 500), (1, 40))]))
    att.expect(1)
    assert att.share(0, 100) == ([11, 22], [71, 29], [100, 40], 0)


def test_one_callid_whose_bytes_do_not_fill_its_operations_says_their_holes():
    """Data sieving: a call's request covers the extent its blocks span; every byte is the call's,
    the bytes of no block are holes."""
    sieved = Attribution([5], P.encode_callid_bytes([((0, 30),), ()]))
    sieved.expect(2)
    assert sieved.share(0, 100) == (None, [100], [30], 70) and sieved.share(1, 50) == (None, [50], [0], 50)
    assert sieved.totals == [150] and sieved.own_totals == [30]


def test_several_callids_without_valid_ownership_are_attributed_at_request_level():
    for hint in (None, [], [2, 0, 5], [1, 3, 5]):  # none, empty, truncated, index out of range
        att = Attribution(CALLIDS, hint)
        att.expect(1)
        assert att.share(0, 100) == (None, [], [], 0) and att.totals is None is att.own_totals
    other_cut = Attribution(CALLIDS, P.encode_callid_bytes([((0, 5),)]))
    other_cut.expect(2)  # the server cuts the stream into 2 operations, the hint says 1
    assert other_cut.share(0, 5) == (None, [], [], 0) and other_cut.totals is None


@given(st.integers(0, 10**12), st.lists(st.integers(0, 10**9), min_size=1, max_size=20))
def test_apportion_adds_up_and_keeps_weights_that_add_up(total, weights):
    parts = apportion(total, weights)
    assert sum(parts) == total and len(parts) == len(weights) and min(parts) >= 0
    if sum(weights):
        for p, w in zip(parts, weights):  # within one byte of the exact proportion
            assert abs(p * sum(weights) - total * w) < sum(weights)
    assert apportion(sum(weights), weights) == weights


@given(st.lists(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 2**40)), max_size=8).map(tuple),
                max_size=30))
def test_callid_bytes_round_trips(buffers):
    encoded = P.encode_callid_bytes(buffers)
    assert P.decode_callid_bytes(encoded, 8) == buffers
    req = P.IoRequest(hints={"callid": list(range(8)), "callid_bytes": encoded})
    assert P.decode(P.encode(req)).hints["callid_bytes"] == encoded
