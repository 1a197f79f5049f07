"""What one traced call asked for and did: a client log row filled in by name as the call runs.

The class is built at run time from the client log's columns (``callid_core.schema.CLIENT``);
type checkers see the class generated from the same columns in ``callid/mpiio/_record_typed.py``
(``python -m callid.mpiio.record > callid/mpiio/_record_typed.py``; a test fails when it is stale).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from callid_core.schema import CLIENT, Column

__all__ = ["Record"]

if TYPE_CHECKING:
    from callid.mpiio._record_typed import Record
else:
    Record = CLIENT.record_type(
        "Record", "One call's client log row being filled in: every column of the client log is a slot "
        "(the schema's default until the call sets it); ``CLIENT.row_of(record)`` reads the row by name.")


#: the Python type of the values of each kind of Arrow type the client log has
_PYTHON = ((pa.types.is_integer, "int"), (pa.types.is_string, "str"), (pa.types.is_boolean, "bool"))


def _python_type(column: Column) -> str:
    """The Python type of a column's values, as an annotation (``| None`` when it may be null)."""
    listed = pa.types.is_list(column.type)
    kind = column.type.value_type if listed else column.type
    name = next((name for is_kind, name in _PYTHON if is_kind(kind)), None)
    if name is None:
        raise TypeError(f"client column {column.name}: no Python type for {column.type}")
    name = f"Sequence[{name}]" if listed else name
    return f"{name} | None" if column.nullable else name


def _param(column: Column) -> str:
    """A column as a parameter of ``__init__``: its default (None: unset, even when not nullable)."""
    annotation = _python_type(column)
    if column.default is None and not column.nullable:
        annotation += " | None"
    return f"        {column.name}: {annotation} = {column.default!r},\n"


def typed_source() -> str:
    """The source of ``callid/mpiio/_record_typed.py``: :data:`Record` as type checkers see it."""
    attributes = "".join(f"    {c.name}: {_python_type(c)}\n" for c in CLIENT.columns)
    params = "".join(map(_param, CLIENT.columns))
    return f'''"""Generated from the client log's columns (callid_core.schema.CLIENT) by
``python -m callid.mpiio.record > callid/mpiio/_record_typed.py``: do not edit.

``callid.mpiio.record.Record`` as type checkers see it (the class itself is built at run time).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["Record"]


class Record:
    """One call's client log row being filled in: every column of the client log an attribute."""

{attributes}
    def __init__(
        self,
{params}    ) -> None:
        """Columns by keyword (or the first ones by position); the schema's defaults for the rest."""
'''


if __name__ == "__main__":
    print(typed_source(), end="")
