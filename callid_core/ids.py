"""CallID layout: a packed ``rank << counter_bits | counter`` integer.

The layout is a run parameter written ``TOTAL/RANK``: ``64/23`` by default
(2^23 ranks, 2^41 - 2 calls per rank; ``64/24`` would stop 2 calls short of
2^40 because counters start at 1 and all ones is the sentinel), ``32/8`` is the
thesis' layout.  All ones is the sentinel "no CallID".
Counters start at 1; a rank or counter that does not fit raises
:class:`CallIDOverflow` instead of wrapping around.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from callid_core.errors import BadValue

__all__ = [
    "DEFAULT_LAYOUT",
    "THESIS_LAYOUT",
    "CallIDError",
    "CallIDOverflow",
    "Layout",
    "Stamper",
]


class CallIDError(BadValue):
    """A CallID layout or CallID string that cannot be used."""


class CallIDOverflow(CallIDError):
    """A rank or counter does not fit the CallID layout."""


@dataclass(frozen=True)
class Layout:
    """How a CallID packs a rank and a per-rank counter into ``total_bits``."""

    total_bits: int = 64
    rank_bits: int = 23

    def __post_init__(self) -> None:
        if self.total_bits not in (32, 64):
            raise CallIDError(f"CallID total bits must be 32 or 64, not {self.total_bits}")
        if not 1 <= self.rank_bits < self.total_bits - 1:
            raise CallIDError(
                f"CallID rank bits must be between 1 and {self.total_bits - 2}, "
                f"not {self.rank_bits}"
            )

    @classmethod
    def parse(cls, text: str) -> Layout:
        """Parse ``"TOTAL/RANK"`` such as ``"64/24"`` or ``"32/8"``."""
        try:
            total, rank = (int(part) for part in text.split("/"))
        except ValueError:
            raise CallIDError(f"CallID layout {text!r} is not TOTAL/RANK, e.g. 64/23") from None
        return cls(total, rank)

    def __str__(self) -> str:
        return f"{self.total_bits}/{self.rank_bits}"

    @property
    def counter_bits(self) -> int:
        return self.total_bits - self.rank_bits

    @property
    def counter_mask(self) -> int:
        """The counter's bits of a CallID."""
        return (1 << self.counter_bits) - 1

    @property
    def max_rank(self) -> int:
        return (1 << self.rank_bits) - 1

    @property
    def max_counter(self) -> int:
        """Largest counter; all-ones is kept free so no CallID equals the sentinel."""
        return (1 << self.counter_bits) - 2

    @property
    def hex_digits(self) -> tuple[int, int]:
        """Hex digits of the rank and of the counter in :meth:`format`."""
        return -(-self.rank_bits // 4), -(-self.counter_bits // 4)

    @property
    def sentinel(self) -> int:
        """The all-ones value meaning "no CallID"."""
        return (1 << self.total_bits) - 1

    def pack(self, rank: int, counter: int) -> int:
        """Pack ``rank`` and ``counter`` (>= 1) into a CallID."""
        if not 0 <= rank <= self.max_rank:
            raise CallIDOverflow(
                f"rank {rank} does not fit CallID layout {self} (max rank {self.max_rank}); "
                "choose a layout with more rank bits, e.g. --callid-layout 64/23"
            )
        if not 1 <= counter <= self.max_counter:
            raise CallIDOverflow(
                f"call counter {counter} of rank {rank} does not fit CallID layout {self} "
                f"(max {self.max_counter}); choose a layout with more counter bits"
            )
        return rank << self.counter_bits | counter

    def unpack(self, callid: int) -> tuple[int, int]:
        """Return ``(rank, counter)`` of a CallID."""
        if not 0 <= callid < self.sentinel:
            raise CallIDError(f"{callid:#x} is not a CallID of layout {self}")
        return callid >> self.counter_bits, callid & self.counter_mask

    def format(self, callid: int) -> str:
        """Hex with rank and counter separated: ``0x000001_0000000003``; ``none`` for the sentinel."""
        if callid == self.sentinel:
            return "none"
        rank, counter = self.unpack(callid)
        rw, cw = self.hex_digits
        return f"0x{rank:0{rw}x}_{counter:0{cw}x}"

    def parse_id(self, text: str) -> int:
        """Parse what :meth:`format` prints (also plain decimal or ``0x`` hex)."""
        text = text.strip().lower()
        if text == "none":
            return self.sentinel
        try:
            if "_" in text and text.startswith("0x"):
                rank_hex, counter_hex = text[2:].split("_")
                return self.pack(int(rank_hex, 16), int(counter_hex, 16))
            value = int(text, 0)
        except ValueError:
            raise CallIDError(f"{text!r} is not a CallID (expected e.g. 0x000001_0000000003)") from None
        self.unpack(value)
        return value


DEFAULT_LAYOUT = Layout(64, 23)
THESIS_LAYOUT = Layout(32, 8)


class Stamper:
    """Hands out the CallIDs of one rank: counter 1, 2, 3, ... (thread-safe).

    ``next`` is on every call's path: the rank is checked once, here, and the counter
    (``itertools.count``, atomic under the GIL) only against its maximum.
    """

    def __init__(self, rank: int, layout: Layout = DEFAULT_LAYOUT) -> None:
        self._base = layout.pack(rank, 1) - 1  # fail at start-up if the rank itself does not fit
        self.rank = rank
        self.layout = layout
        self._max = layout.max_counter
        self._counter = itertools.count(1)

    def next(self) -> int:
        """The next CallID of this rank."""
        counter = next(self._counter)
        if counter > self._max:
            return self.layout.pack(self.rank, counter)  # raises CallIDOverflow
        return self._base | counter
