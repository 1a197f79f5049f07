"""Flattening MPI datatypes into byte runs, checked against MPI's own typemap."""

from __future__ import annotations

from mpi4py import MPI

from callid.mpiio.datatypes import _by_packing, flatten


def test_flatten_agrees_with_mpi_on_every_combiner():
    """MPI's own typemap (Pack of position planes) is the oracle, over byte-exact element types."""
    cyclic, none, dflt = MPI.DISTRIBUTE_CYCLIC, MPI.DISTRIBUTE_NONE, MPI.DISTRIBUTE_DFLT_DARG
    types = [
        MPI.INT.Create_vector(3, 2, 4), MPI.DOUBLE.Create_hvector(2, 3, 40),
        MPI.INT.Create_indexed([2, 1], [5, 0]), MPI.INT.Create_hindexed([1, 2], [0, 40]),
        MPI.INT.Create_indexed_block(2, [0, 5]),
        MPI.Datatype.Create_struct([1, 2], [0, 8], [MPI.INT, MPI.DOUBLE]),
        MPI.DOUBLE.Create_subarray([4, 5], [2, 3], [1, 1]),
        MPI.DOUBLE.Create_subarray([4, 5], [2, 3], [1, 1], order=MPI.ORDER_FORTRAN),
        MPI.INT.Create_resized(-4, 20), MPI.INT.Create_resized(0, 2).Create_contiguous(3),
        MPI.INT.Create_darray(4, 1, [8], [cyclic], [2], [4]),
        MPI.DOUBLE.Create_darray(2, 1, [14, 5], [cyclic, none], [1, dflt], [2, 1]),
    ]
    for t in types:
        t.Commit()
        assert list(flatten(t).runs) == _by_packing(t), t.decode()[1]
        t.Free()


def test_darray_of_long_double_keeps_whole_elements():
    """MPICH packs long double as 10 significant bytes: darrays are flattened over byte blocks."""
    t = MPI.LONG_DOUBLE.Create_darray(2, 1, [14, 5], [MPI.DISTRIBUTE_CYCLIC, MPI.DISTRIBUTE_NONE],
                                      [1, MPI.DISTRIBUTE_DFLT_DARG], [2, 1]).Commit()
    flat = flatten(t)
    assert flat.size == 7 * 5 * 16 and flat.runs[:2] == ((80, 80), (240, 80)) and len(flat.runs) == 7
    t.Free()
