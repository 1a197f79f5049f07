"""Per-operation attribution of aggregated requests (server_sim.attribution), on its own."""

from server_sim.attribution import attribution
from server_sim.distribution import SimpleStripe

DIST = SimpleStripe(100, 2)  # datafile 0 holds logical [0,100), [200,300), ...; datafile 1 the rest
CALLIDS = [11, 22, 33]
MAP = [0, 150, 0, 150, 50, 1, 200, 100, 2]


def test_each_piece_is_attributed_to_the_owners_of_its_logical_bytes():
    on0 = attribution(CALLIDS, MAP, DIST, 0)
    assert on0([(0, 50)]) == [11]  # logical [0, 50)
    assert on0([(100, 100)]) == [33]  # physical [100, 200) on datafile 0 = logical [200, 300)
    assert on0([(50, 100)]) == [11, 33]  # crosses a strip: logical [50,100) and [200,250)
    on1 = attribution(CALLIDS, MAP, DIST, 1)
    assert on1([(0, 100)]) == [11, 22]  # logical [100, 200): 0 owns [100,150), 1 [150,250)


def test_overlapping_owners_and_unowned_bytes():
    both = attribution([1, 2], [0, 100, 0, 0, 100, 1], DIST, 0)  # both read the same bytes
    assert both([(10, 5)]) == [1, 2]
    hole = attribution([1, 2], [0, 10, 0], DIST, 0)
    assert hole([(50, 10)]) == [1, 2]  # nobody's bytes (a hole): all calls of the request


def test_requests_without_a_map_or_with_one_callid_need_no_attribution():
    assert attribution([5, 6], [], DIST, 0) is None  # every operation serves the request's list
    assert attribution([5], [0, 10, 0], DIST, 0) is None
