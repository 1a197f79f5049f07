"""Data representations of a view (MPI 3.1 13.5): ``native`` and ``internal`` store the data as it is in
memory; ``external32`` in MPI's portable form (big-endian, IEEE), which the file holds and the buffers
never see.

The conversion is MPI's own: each predefined type's external32 form is what ``MPI_Pack_external``
makes of it, found once as a permutation of its bytes (an int on a little-endian host: reversed).  A
datatype's packed data (its predefined elements in typemap order, as a view's stream holds it) converts
by the permutations of its elements.  A predefined type whose external32 form is not a permutation of its
bytes (a different size, as MPI_LONG's 4 bytes for 8; x87's long double) is refused: a view's positions
would no longer be the buffer's bytes.
"""

from __future__ import annotations

from functools import cache

import numpy as np
from mpi4py import MPI

__all__ = ["DATAREPS", "Conversion", "UnsupportedType"]

#: the representations a view takes; ``internal`` is this implementation's own, the same as native
DATAREPS = ("native", "internal", "external32")


class UnsupportedType(ValueError):
    """A datatype whose external32 form is not a permutation of its native bytes."""


@cache
def _named_permutation(handle: int) -> tuple[int, ...]:
    """The external32 form of one element of a predefined type, as the native byte each byte comes from."""
    dtype = MPI.Datatype.fromhandle(handle)
    size = dtype.Get_size()
    if dtype.Pack_external_size("external32", 1) != size:
        raise UnsupportedType(f"{dtype.Get_name()} is {dtype.Pack_external_size('external32', 1)} bytes in "
                              f"external32 and {size} here")
    probe = bytes(range(1, size + 1))  # (a size above 255 does not occur among predefined types)
    out = bytearray(size)
    dtype.Pack_external("external32", probe, out, 0)
    perm = tuple(b - 1 for b in out)
    if sorted(perm) != list(range(size)):
        raise UnsupportedType(f"{dtype.Get_name()}'s external32 form is not its bytes reordered")
    return perm


def _permutation(dtype: MPI.Datatype) -> np.ndarray:
    """For one element of ``dtype`` packed (its predefined elements in typemap order): the native byte
    each byte of its external32 form comes from."""
    base, combiner, p = dtype.decode()
    if combiner == "NAMED":
        return np.asarray(_named_permutation(dtype.handle), np.int64)
    if combiner in ("DUP", "RESIZED"):
        return _permutation(base)
    if combiner == "STRUCT":
        parts = [_tile(_permutation(t), n) for n, t in zip(p["blocklengths"], p["datatypes"])]
    else:  # (every other combiner repeats one type: as many of its elements as the size holds)
        size = base.Get_size()
        parts = [_tile(_permutation(base), dtype.Get_size() // size)] if size else []
    starts = np.cumsum([0] + [len(q) for q in parts[:-1]])
    return np.concatenate([q + at for q, at in zip(parts, starts)]) if parts else np.zeros(0, np.int64)


def _tile(perm: np.ndarray, count: int) -> np.ndarray:
    """``count`` elements one after the other."""
    return (np.arange(count)[:, None] * len(perm) + perm[None, :]).ravel()


class Conversion:
    """Between one datatype's packed native data and its external32 form (the same bytes, reordered);
    :class:`UnsupportedType` if external32 cannot hold the type byte for byte."""

    def __init__(self, dtype: MPI.Datatype) -> None:
        self.perm = _permutation(dtype)
        self.size = len(self.perm)
        self.identity = bool(np.array_equal(self.perm, np.arange(self.size)))

    def apply(self, data: memoryview | bytes, out: memoryview | None = None) -> memoryview:
        """Native ``data`` (whole elements; a partial last one is left as it is) in external32: into
        ``out`` (it may be ``data`` itself), else a new buffer."""
        return self._permute(data, self.perm, out)

    def undo(self, data: memoryview | bytes, out: memoryview | None = None) -> memoryview:
        """external32 ``data`` back to native (as :meth:`apply`)."""
        return self._permute(data, np.argsort(self.perm), out)

    def _permute(self, data: memoryview | bytes, perm: np.ndarray, out: memoryview | None) -> memoryview:
        src = np.frombuffer(data, np.uint8)
        whole = len(src) - len(src) % self.size if self.size else 0
        result = src.copy() if out is None else np.frombuffer(out, np.uint8)
        if not self.identity and whole:
            result[:whole] = src[:whole].reshape(-1, self.size)[:, perm].ravel()
        return memoryview(result)
