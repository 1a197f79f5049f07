"""Per-operation attribution of aggregated requests (server_sim.attribution), on its own."""

from server_sim.attribution import attribution
from server_sim.distribution import SimpleStripe

DIST = SimpleStripe(100, 2)  # datafile 0 holds logical [0,100), [200,300), ...; datafile 1 the rest
HINTS = {"callid": [11, 22, 33], "callid_map": [0, 150, 0, 150, 50, 1, 200, 100, 2]}


def test_each_piece_is_attributed_to_the_owners_of_its_logical_bytes():
    on0 = attribution(HINTS, DIST, 0)
    assert on0([(0, 50)])["callid"] == [11]  # logical [0, 50)
    assert on0([(100, 100)])["callid"] == [33]  # physical [100, 200) on datafile 0 = logical [200, 300)
    assert on0([(50, 100)])["callid"] == [11, 33]  # crosses a strip: logical [50,100) and [200,250)
    on1 = attribution(HINTS, DIST, 1)
    assert on1([(0, 100)])["callid"] == [11, 22]  # logical [100, 200): 0 owns [100,150), 1 [150,250)


def test_overlapping_owners_and_unowned_bytes():
    hints = {"callid": [1, 2], "callid_map": [0, 100, 0, 0, 100, 1]}  # both read the same bytes
    assert attribution(hints, DIST, 0)([(10, 5)])["callid"] == [1, 2]
    hole = attribution({"callid": [1, 2], "callid_map": [0, 10, 0]}, DIST, 0)
    assert hole([(50, 10)])["callid"] == [1, 2]  # nobody's bytes (a hole): all calls of the request


def test_requests_without_a_map_keep_their_list():
    hints = {"callid": [5, 6]}
    assert attribution(hints, DIST, 0)([(0, 10)]) is hints
