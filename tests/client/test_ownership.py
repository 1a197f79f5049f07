"""The client's ownership of each disk operation (callid.mpiio.ownership), against byte-by-byte
counts, and the splitting of a request's stream."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from callid.mpiio.ownership import Owners, owned_per_buffer, split_items, stream_bytes
from server_sim.distribution import SimpleStripe


def _items(dist: SimpleStripe, regions: list[tuple[int, int]]) -> dict[int, list]:
    """Per datafile: the request items of an access, as SysInt.io makes them."""
    plan: dict[int, list] = {}
    pos = 0
    for off, length in regions:
        for n, pieces, _ in dist.stream_pieces(off, length):
            plan.setdefault(n, []).append(((off, length), tuple((p + pos, k) for p, k in pieces), pos))
        pos += length
    return plan


def _stream(items) -> list[int]:
    """The logical offset of every byte of a request's stream, in order."""
    return [off + p - pos + i for (off, _), pieces, pos in items for p, k in pieces for i in range(k)]


@st.composite
def accesses(draw):
    dist = SimpleStripe(draw(st.sampled_from([4, 8, 16])), draw(st.integers(1, 3)))
    starts = sorted(draw(st.lists(st.integers(0, 200), min_size=1, max_size=6, unique=True)))
    regions = [(a, draw(st.integers(1, 40))) for a in starts]
    regions = [(a, min(n, b - a)) for (a, n), (b, _) in zip(regions, [*regions[1:], (10**9, 0)])]
    owner = st.tuples(st.integers(0, 240), st.integers(0, 30), st.integers(0, 3))  # (may overlap)
    owners = draw(st.lists(owner, max_size=12))
    return dist, regions, owners, draw(st.integers(1, 50))


@settings(max_examples=300, deadline=None)
@given(accesses())
def test_each_buffer_says_the_bytes_each_call_owns_of_it(access):
    dist, regions, owners, buffer = access
    for items in _items(dist, regions).values():
        stream = _stream(items)
        got = owned_per_buffer(items, Owners(owners), 4, buffer)
        assert len(got) == -(-len(stream) // buffer)
        for k, entries in enumerate(got):
            counts = Counter(i for b in stream[k * buffer:(k + 1) * buffer]
                             for i in {i for o, n, i in owners if o <= b < o + n})
            assert dict(entries) == dict(counts) and [i for i, _ in entries] == sorted(counts)
        # no owners given: every call owns every byte
        sizes = [len(stream[k:k + buffer]) for k in range(0, len(stream), buffer)]
        assert owned_per_buffer(items, None, 2, buffer) == [((0, n), (1, n)) for n in sizes]


@settings(max_examples=300, deadline=None)
@given(accesses(), st.data())
def test_a_split_stream_is_the_stream_and_each_part_is_what_its_regions_hold(access, data):
    dist, regions, _, _ = access
    for n, items in _items(dist, regions).items():
        total = stream_bytes(items)
        if total < 2:
            continue
        cut = data.draw(st.integers(1, total - 1))
        left, right = split_items(items, cut)
        assert stream_bytes(left) == cut and _stream(left) + _stream(right) == _stream(items)
        for part in (left, right):
            # the server finds exactly these pieces' bytes in the part's regions
            assert sum(dist.share(n, off, length)[1] for (off, length), _, _ in part) == stream_bytes(part)
            assert all(length > 0 for (_, length), _, _ in part)
