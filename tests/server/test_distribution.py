"""simple_stripe arithmetic and flow-buffer splitting, on their own."""

from collections import defaultdict

from hypothesis import given
from hypothesis import strategies as st

from server_sim.distribution import SimpleStripe, split_buffers

layouts = st.builds(SimpleStripe, st.integers(512, 1 << 17), st.integers(1, 8))


@given(layouts, st.integers(0, 1 << 22), st.integers(0, 1 << 20))
def test_share_equals_the_strip_walk(dist, offset, length):
    per_dfile = defaultdict(list)
    for n, phys, k in dist.segments(offset, length):
        per_dfile[n].append((phys, k))
    for n in range(dist.dfile_count):
        start, size = dist.share(n, offset, length)
        segs = per_dfile.get(n, [])
        assert size == sum(k for _, k in segs)
        if segs:  # a contiguous logical range is contiguous on each datafile
            assert segs[0][0] == start
            assert all(a[0] + a[1] == b[0] for a, b in zip(segs, segs[1:]))


@given(layouts, st.integers(0, 1 << 40), st.integers(1, 1 << 26))
def test_stream_pieces_equal_the_strip_walk_wherever_the_range_starts(dist, offset, length):
    walk: dict[int, list[tuple[int, int]]] = {}
    pos = 0
    for n, _phys, k in dist.segments(offset, length):
        walk.setdefault(n, []).append((pos, k))
        pos += k
    pieces = dist.stream_pieces(offset, length)
    assert [(n, list(p), b) for n, p, b in pieces] == [(n, p, sum(k for _, k in p)) for n, p in walk.items()]


@given(layouts, st.integers(0, 1 << 22))
def test_physical_and_logical_offsets_invert(dist, logical):
    n = dist.dfile_of(logical)
    phys = dist.physical_start(n, logical)
    assert dist.physical_to_logical(n, phys) == logical


@given(layouts, st.integers(0, 1 << 22))
def test_file_size_round_trips_through_datafile_sizes(dist, size):
    sizes = [dist.physical_start(n, size) for n in range(dist.dfile_count)]
    assert max(dist.logical_size(n, s) for n, s in enumerate(sizes)) == size


def test_thesis_demo_layout():
    dist = SimpleStripe(65536, 2)
    assert dist.share(0, 0, 1 << 20) == (0, 1 << 19)
    assert dist.share(1, 1 << 20, 1 << 20) == (1 << 19, 1 << 19)
    assert len(split_buffers([dist.share(0, 0, 1 << 20)], 65536)) == 8


@given(st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(1, 5000)), max_size=10),
       st.integers(1, 9000))
def test_split_buffers_cuts_the_stream_into_full_buffers(segments, size):
    buffers = split_buffers(segments, size)
    sizes = [sum(k for _, k in b) for b in buffers]
    total = sum(k for _, k in segments)
    assert sum(sizes) == total
    assert all(s == size for s in sizes[:-1])
    flat = [(o + i) for b in buffers for o, k in b for i in range(k)] if total < 20000 else None
    if flat is not None:
        assert flat == [(o + i) for o, k in segments for i in range(k)]
