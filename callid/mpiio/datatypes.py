"""Flatten MPI datatypes into byte runs ``(offset, length)`` in typemap order.

A run list is what list I/O needs: the file side (a view's filetype) becomes
file regions, the memory side (a buffer's datatype) becomes the pieces gathered
into, or scattered from, the data stream.  Every combiner mpi4py can decode is
handled: named, dup, contiguous, vector, hvector, indexed, hindexed,
indexed_block, hindexed_block, struct, subarray, darray and resized.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from mpi4py import MPI

Runs = list[tuple[int, int]]


@dataclass(frozen=True)
class Flat:
    """A datatype as byte runs relative to its origin, with its size, lower bound and extent."""

    runs: tuple[tuple[int, int], ...]
    size: int
    lb: int
    extent: int

    @property
    def contiguous(self) -> bool:
        """One run starting at the lower bound and filling the extent: data = memory image."""
        return len(self.runs) == 1 and self.runs[0] == (self.lb, self.extent) or self.size == 0

    def tile(self, count: int, base: int = 0) -> Runs:
        """Runs of ``count`` consecutive elements starting at ``base``."""
        if self.contiguous:
            return [(base + self.lb, self.size * count)] if count and self.size else []
        return merge_runs((base + i * self.extent + off, n) for i in range(count) for off, n in self.runs)


def merge_runs(runs: Iterable[tuple[int, int]]) -> Runs:
    """Drop empty runs and join runs that touch."""
    out: Runs = []
    for off, n in runs:
        if n <= 0:
            continue
        if out and out[-1][0] + out[-1][1] == off:
            out[-1] = (out[-1][0], out[-1][1] + n)
        else:
            out.append((off, n))
    return out


def overlapping(flat: Flat, count: int) -> bool:
    """Whether ``count`` elements of a type hold a byte more than once (a read into such a buffer is
    erroneous: MPI 3.1 13.4.1).  The elements are compared only when one's runs reach past its extent."""
    runs = sorted(flat.runs)
    if _shared(runs):
        return True
    span = runs[-1][0] + runs[-1][1] - runs[0][0] if runs else 0
    return count > 1 and span > flat.extent and _shared(sorted(flat.tile(count)))


def _shared(ordered: Runs) -> bool:
    """Whether two of the runs, ordered by offset, share a byte."""
    return any(off + n > nxt for (off, n), (nxt, _) in zip(ordered, ordered[1:]))


#: an address below this is not taken for one: small byte displacements are common, and a program's own
#: data lies higher on a 64-bit system built position-independent (the C tracer uses the same bound)
ADDRESS_MIN = 1 << 32


def at_addresses(*flats: Flat) -> bool:
    """Whether a run of ``flats`` starts at an address of this process's memory (at least
    :data:`ADDRESS_MIN`): the type was built from absolute addresses (MPI_Get_address), which an etype or
    filetype must not be (MPI 3.1 13.3)."""
    starts = [off for flat in flats for off, _ in flat.runs if off >= ADDRESS_MIN]
    if not starts:
        return False
    with open("/proc/self/maps") as maps:
        spans = [tuple(int(a, 16) for a in line.split(None, 1)[0].split("-")) for line in maps]
    return any(lo <= off < hi for off in starts for lo, hi in spans)


def committed(dtype: MPI.Datatype) -> bool:
    """Whether ``dtype`` may be used to move data: committed (MPI_Type_commit), as predefined types are.
    (MPI has no query for it: packing no element fails with MPI_ERR_TYPE exactly when it is not.)"""
    if dtype.is_predefined:
        return True
    try:
        dtype.Pack(bytearray(0), bytearray(0), 0, MPI.COMM_SELF)
    except MPI.Exception as exc:
        if exc.Get_error_class() == MPI.ERR_TYPE:
            return False
        raise
    return True


def flatten(dtype: MPI.Datatype) -> Flat:
    """Byte runs of one element of ``dtype``."""
    lb, extent = dtype.Get_extent()
    return Flat(tuple(_runs(dtype)), dtype.Get_size(), lb, extent)


def _runs(dtype: MPI.Datatype) -> Runs:
    base, combiner, p = dtype.decode()
    if combiner == "NAMED":
        return [(0, dtype.Get_size())] if dtype.Get_size() else []
    if combiner in ("DUP", "RESIZED"):
        return _runs(base)
    if combiner == "STRUCT":
        return merge_runs(run for d, n, t in zip(p["displacements"], p["blocklengths"], p["datatypes"])
                          for run in flatten(t).tile(n, d))
    if combiner == "DARRAY":
        return _darray(flatten(base), p)
    bflat = flatten(base)
    ext = bflat.extent
    if combiner == "CONTIGUOUS":
        return bflat.tile(p["count"])
    if combiner in ("VECTOR", "HVECTOR"):
        stride = p["stride"] * (ext if combiner == "VECTOR" else 1)
        return _blocks(bflat, ((i * stride, p["blocklength"]) for i in range(p["count"])))
    if combiner in ("INDEXED", "HINDEXED"):
        scale = ext if combiner == "INDEXED" else 1
        return _blocks(bflat, ((d * scale, n) for d, n in zip(p["displacements"], p["blocklengths"])))
    if combiner in ("INDEXED_BLOCK", "HINDEXED_BLOCK"):
        scale = ext if combiner == "INDEXED_BLOCK" else 1
        return _blocks(bflat, ((d * scale, p["blocklength"]) for d in p["displacements"]))
    if combiner == "SUBARRAY":
        return _subarray(bflat, p["sizes"], p["subsizes"], p["starts"], p["order"])
    return _by_packing(dtype)  # anything newer (exact for byte-exact element types)


def _blocks(base: Flat, blocks: Iterable[tuple[int, int]]) -> Runs:
    """Runs of ``count`` base elements at each byte displacement."""
    return merge_runs(run for disp, count in blocks for run in base.tile(count, disp))


def _subarray(base: Flat, sizes: list[int], subsizes: list[int], starts: list[int], order: int) -> Runs:
    if order == MPI.ORDER_FORTRAN:
        sizes, subsizes, starts = sizes[::-1], subsizes[::-1], starts[::-1]
    strides = [1] * len(sizes)
    for i in range(len(sizes) - 2, -1, -1):
        strides[i] = strides[i + 1] * sizes[i + 1]
    outer = itertools.product(*(range(s, s + n) for s, n in zip(starts[:-1], subsizes[:-1])))
    runs = []
    for idx in outer:
        first = sum(i * s for i, s in zip(idx, strides)) + starts[-1]
        runs += base.tile(subsizes[-1], first * base.extent)
    return merge_runs(runs)


def _darray(base: Flat, p: dict) -> Runs:
    """A darray's element slots, found by packing the same darray over an opaque byte block of
    the element's extent (MPI packs bytes exactly; it may not pack e.g. long double so), then
    each slot filled with the element's own runs."""
    block = MPI.BYTE.Create_contiguous(base.extent).Commit()
    slots = block.Create_darray(p["size"], p["rank"], p["gsizes"], p["distribs"], p["dargs"], p["psizes"],
                                p["order"]).Commit()
    try:
        runs = _by_packing(slots)
    finally:
        slots.Free()
        block.Free()
    return merge_runs(run for off, n in runs for i in range(n // base.extent)
                      for run in base.tile(1, off + i * base.extent))


@lru_cache(maxsize=64)
def _planes(n: int) -> tuple[bytes, bytes, bytes, bytes]:
    """Byte j of every position 0..n-1, one plane per j (little-endian)."""
    planes = []
    for j in range(4):
        block = 256**j
        unit = b"".join(bytes([v]) * block for v in range(min(256, -(-n // block))))
        planes.append((unit * -(-n // len(unit)))[:n] if n else b"")
    return tuple(planes)  # type: ignore[return-value]


def _by_packing(dtype: MPI.Datatype) -> Runs:
    """Let MPI itself say where each byte of the type comes from (Pack of position planes)."""
    true_lb, true_extent = dtype.Get_true_extent()
    size = dtype.Get_size()
    # The same type moved to start at 0 and resized to its true extent, so one element of it
    # is exactly a buffer of ``true_extent`` bytes (mpi4py derives the count from the length).
    moved = dtype.Create_hindexed([1], [-true_lb])
    shifted = moved.Create_resized(0, true_extent).Commit()
    moved.Free()
    try:
        positions = [0] * size
        for j, plane in enumerate(_planes(true_extent)):
            packed = bytearray(size)
            shifted.Pack(plane, packed, 0, MPI.COMM_SELF)
            for k, b in enumerate(packed):
                positions[k] |= b << (8 * j)
    finally:
        shifted.Free()
    return merge_runs((true_lb + p, 1) for p in positions)


def type_name(dtype: Any) -> str | None:
    """A predefined datatype's name; a derived one as the constructors it was made with, down to the
    predefined types: ``vector(MPI_INT)``, ``struct(MPI_INT,resized(MPI_DOUBLE))`` (cut at
    :data:`TYPE_TEXT_MAX` characters with ``...``)."""
    if not isinstance(dtype, MPI.Datatype) or dtype == MPI.DATATYPE_NULL:
        return None
    text = _type_text(dtype)
    return text if len(text) <= TYPE_TEXT_MAX else text[:TYPE_TEXT_MAX - 3] + "..."


#: the longest description of a datatype logged (the C tracer cuts alike)
TYPE_TEXT_MAX = 256


def _type_text(dtype: MPI.Datatype) -> str:
    base, combiner, params = dtype.decode()
    if combiner == "NAMED":
        return dtype.Get_name()
    parts = params.get("datatypes") if combiner == "STRUCT" else [base]
    return f"{combiner.lower()}({','.join(_type_text(t) for t in parts)})"


class TypeLog:
    """The datatypes of a rank's calls, each logged once at its first use (HDTrace's datatype map): an id
    per type (1, 2, ... a type's parts before it), and one call of ``log`` per type with the client log's
    columns of a 'type' row: its combiner (``func``), description, size, extent, its constructor's
    integer and address arguments and the ids of the types it was made of."""

    def __init__(self, log: Callable[[dict], None]) -> None:
        self._ids: dict[tuple[int, str], int] = {}
        self._log = log

    def ids(self, *dtypes: Any) -> list[int]:
        """The ids of these datatypes (those that are datatypes), logging those not seen before."""
        return [self._id(t) for t in dtypes if isinstance(t, MPI.Datatype) and t != MPI.DATATYPE_NULL]

    def _id(self, dtype: MPI.Datatype) -> int:
        key = (dtype.handle, _type_text(dtype))  # (a freed type's handle may be another type's later)
        if (known := self._ids.get(key)) is not None:
            return known
        base, combiner, params = dtype.decode()
        parts = [] if combiner == "NAMED" else params["datatypes"] if combiner == "STRUCT" else [base]
        types = [self._id(t) for t in parts]
        integers, addresses = _arguments(combiner, params)
        self._ids[key] = new = len(self._ids) + 1
        self._log({"type_id": new, "func": f"MPI_COMBINER_{combiner}", "datatype": type_name(dtype),
                   "size": dtype.Get_size(), "extent": dtype.Get_extent()[1], "integers": integers,
                   "addresses": addresses, "types": types})
        return new


def _arguments(combiner: str, p: dict) -> tuple[list[int], list[int]]:
    """A constructor's integer and address arguments, in the order MPI_Type_get_contents gives them."""
    def many(*keys: str) -> list[int]:
        return [v for k in keys for v in p.get(k, ())]
    n, block = p.get("count", 0), p.get("blocklength", 0)
    blocks, disps = many("blocklengths"), many("displacements")
    return {
        "CONTIGUOUS": ([n], []),
        "VECTOR": ([n, block, p.get("stride", 0)], []),
        "HVECTOR": ([n, block], [p.get("stride", 0)]),
        "INDEXED": ([len(blocks), *blocks, *disps], []),
        "HINDEXED": ([len(blocks), *blocks], disps),
        "INDEXED_BLOCK": ([len(disps), block, *disps], []),
        "HINDEXED_BLOCK": ([len(disps), block], disps),
        "STRUCT": ([len(blocks), *blocks], disps),
        "SUBARRAY": ([len(many("sizes")), *many("sizes", "subsizes", "starts"), p.get("order", 0)], []),
        "DARRAY": ([p.get("size", 0), p.get("rank", 0), len(many("gsizes")),
                    *many("gsizes", "distribs", "dargs", "psizes"), p.get("order", 0)], []),
        "RESIZED": ([], [p.get("lb", 0), p.get("extent", 0)]),
    }.get(combiner, ([], []))


def buffer_spec(buf: Any) -> tuple[memoryview, int, MPI.Datatype]:
    """Resolve ``buf``, ``[buf, datatype]``, ``[buf, count, datatype]`` or
    ``[buf, (count, displ), datatype]`` to ``(bytes view from the element origin, count, datatype)``."""
    count = displ = None
    dtype = None
    if isinstance(buf, (list, tuple)):
        if len(buf) == 2:
            obj, dtype = buf
        elif len(buf) == 3:
            obj, count, dtype = buf
            if isinstance(count, tuple):
                count, displ = count
        else:
            raise ValueError(f"message: buffer specification of {len(buf)} items")
    else:
        obj = buf
    view = memoryview(obj)
    if dtype is None:
        dtype = getattr(MPI, "_typedict", {}).get(view.format, MPI.BYTE)
    view = view.cast("B") if view.format != "B" or view.ndim != 1 else view
    extent = dtype.Get_extent()[1]
    if count is None:
        count = view.nbytes // extent if extent else 0
    return view[(displ or 0) * extent:], count, dtype
