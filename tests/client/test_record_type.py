"""The client log's columns are declared once (callid_core.schema.CLIENT): the record a call fills in
is built from them at run time, and the class type checkers see is generated from them."""

from __future__ import annotations

import inspect

from callid.mpiio import _record_typed
from callid.mpiio.record import Record, typed_source
from callid_core.schema import CLIENT
from tests.conftest import ROOT

TYPED = ROOT / "callid" / "mpiio" / "_record_typed.py"


def test_the_typed_record_is_current():
    assert TYPED.read_text() == typed_source(), (
        "callid/mpiio/_record_typed.py is stale: "
        "python -m callid.mpiio.record > callid/mpiio/_record_typed.py")


def test_the_typed_record_has_every_column_with_its_default():
    typed = _record_typed.Record
    assert tuple(typed.__annotations__) == CLIENT.names
    params = list(inspect.signature(typed.__init__).parameters.values())[1:]
    assert [(p.name, p.default) for p in params] == [(c.name, c.default) for c in CLIENT.columns]


def test_the_typed_annotations_say_which_columns_may_be_null():
    for column in CLIENT.columns:
        annotation = _record_typed.Record.__annotations__[column.name]
        assert annotation.endswith(" | None") == column.nullable, column.name


def test_the_record_built_at_run_time_has_the_same_columns():
    assert Record.__slots__ == CLIENT.names
    assert CLIENT.row_of(Record(7, func="MPI_File_sync")) == CLIENT.row(callid=7, func="MPI_File_sync")
