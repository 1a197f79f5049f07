"""Sizes, ranks: what the command line takes, and what it refuses as ambiguous or unbounded."""

from __future__ import annotations

import pytest

from callid_core.errors import BadValue
from callid_core.units import RankSet, parse_ranks, parse_size, plural


@pytest.mark.parametrize(("text", "size"), [("65536", 65536), ("64KiB", 65536), ("64 KiB", 65536),
                                            ("64k", 65536), ("1m", 1 << 20), ("2GiB", 2 << 30)])
def test_sizes_are_binary(text, size):
    assert parse_size(text) == size


def test_decimal_units_are_refused_as_ambiguous_unless_duckdbs_meaning_holds():
    with pytest.raises(BadValue, match=r"'64kb' is ambiguous \(1000 or 1024\?\): write 64KiB \(65536 bytes\) "
                                       r"or 64000"):
        parse_size("64kb")
    assert parse_size("4GB", decimal=True) == 4 * 10**9 and parse_size("4GiB", decimal=True) == 4 << 30


def test_rank_ranges_stay_ranges():
    ranks = parse_ranks("9-2147483647, 0-3,4,7-8")
    assert ranks == RankSet(((0, 4), (7, 2147483647)))  # (merged where they touch)
    assert len(ranks) == 5 + 2147483641 and 5 not in ranks and 2147483647 in ranks and "x" not in ranks
    assert RankSet.of([5, 1, 2, 3]) == RankSet(((1, 3), (5, 5)))
    with pytest.raises(BadValue, match="goes beyond 2147483647, the largest rank a log holds"):
        parse_ranks("0-2147483648")


def test_counts_say_one_thing_in_the_singular():
    """callid check once printed "1 errors"."""
    assert [plural(n, "error") for n in (0, 1, 2)] == ["0 errors", "1 error", "2 errors"]
