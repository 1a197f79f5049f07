"""What one traced call asked for and did: a client log row filled in by name as the call runs."""

from __future__ import annotations

from callid_core.schema import CLIENT

__all__ = ["Record"]

Record = CLIENT.record_type(
    "Record", "One call's client log row being filled in: every column of the client log is a slot "
    "(the schema's default until the call sets it); ``CLIENT.row_of(record)`` reads the row by name.")
