"""What one traced call asked for and did: a client log row filled in by name as the call runs."""

from __future__ import annotations

from typing import Any

from callid_core.schema import CLIENT

__all__ = ["Record"]


class Record:
    """Every column of the client log is an attribute, the schema's default until the call sets it;
    ``CLIENT.row_of(record)`` reads the row off by name."""

    def __init__(self, callid: int, **columns: Any) -> None:
        self.callid = callid
        self.__dict__.update(columns)

    def __repr__(self) -> str:
        return f"Record({vars(self)})"


for _column in CLIENT.columns:  # the defaults, from the one declaration of the columns
    setattr(Record, _column.name, _column.default)
