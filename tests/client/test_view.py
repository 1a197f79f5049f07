"""File views: positions in etypes map to the file's byte regions, checked against MPI's own packing."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from callid.mpiio.view import View


def _types():
    INT = MPI.INT
    vector = INT.Create_vector(3, 2, 5).Commit()                       # 2 ints of every 5, 3 times
    resized = INT.Create_vector(2, 1, 3).Create_resized(0, 40).Commit()  # holes at the end of the tile
    sub = MPI.DOUBLE.Create_subarray([8, 8], [4, 2], [2, 6]).Commit()   # a 4x2 block of an 8x8 array
    indexed = MPI.BYTE.Create_indexed([3, 1, 5], [2, 7, 11]).Commit()  # odd lengths, not etype-aligned
    return [("contiguous", MPI.INT, MPI.INT), ("vector", INT, vector), ("resized", INT, resized),
            ("subarray", MPI.DOUBLE, sub), ("indexed bytes", MPI.BYTE, indexed)]


@pytest.mark.parametrize("name, etype, filetype", _types(), ids=lambda v: v if isinstance(v, str) else "")
def test_regions_select_the_bytes_mpi_packs(name, etype, filetype):
    disp, tiles = 24, 3
    view = View(disp, etype, filetype)
    lb, extent = filetype.Get_extent()
    image = (np.arange(disp + lb + extent * (tiles + 1)) % 251).astype(np.uint8)  # byte i holds i mod 251
    packed = bytearray(filetype.Get_size() * tiles)
    tiled = filetype.Create_contiguous(tiles).Commit()
    tiled.Pack(image[disp:disp + lb + extent * tiles], packed, 0, MPI.COMM_SELF)  # MPI's own typemap walk
    tiled.Free()
    esize = etype.Get_size()
    total = len(packed) // esize
    for pos, count in [(0, total), (1, total - 1), (total // 2, 1), (total - 2, 2)]:
        regions = view.regions(pos, count * esize)
        got = b"".join(image[off:off + n].tobytes() for off, n in regions)
        assert got == packed[pos * esize:(pos + count) * esize], (name, pos, count)
        assert all(a + n < b for (a, n), (b, _) in zip(regions, regions[1:]))  # sorted, merged
    for pos in range(total):
        assert view.position_of(view.byte_offset(pos)) == pos
    view.free()


def test_get_returns_handles_the_caller_may_free():
    ft = MPI.INT.Create_vector(2, 1, 2).Commit()
    view = View(8, MPI.INT, ft)
    ft.Free()  # the view keeps its own
    disp, etype, filetype, rep = view.get()
    assert (disp, etype.Get_size(), filetype.Get_size(), rep) == (8, 4, 8, "native")
    assert view.regions(0, 8) == [(8, 4), (16, 4)]
    filetype.Free()
    view.free()


def test_an_empty_filetype_maps_nothing():
    empty = MPI.BYTE.Create_contiguous(0).Commit()
    view = View(16, MPI.BYTE, empty)
    assert view.regions(0, 10) == [] and view.byte_offset(3) == 16 and view.position_of(100) == 0
    view.free()
