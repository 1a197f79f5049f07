"""The SQL dialects the merge's steps are written for: one description of each step, its SQL made per
engine (DuckDB, the default; Spark SQL for ``callid merge --engine spark``).

A step writes the parts where the two disagree through a :class:`Dialect`: list literals and
lambdas, 1-based list access, the CallID constants (DuckDB reads the logs' CallIDs as ``UBIGINT``;
Spark has no unsigned type, so its views of the logs hold the same 64 bits as a ``BIGINT``) and
unnesting two lists side by side.  Everything else is the SQL both accept (``CAST``, ``FILTER
(WHERE ...)``, ``least``, ``any_value``, joins)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

_U64 = 1 << 64
_I64_MAX = (1 << 63) - 1


def literal(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True)
class Dialect:
    """How one engine writes what the merge's SQL needs beyond the subset both engines accept."""

    name: str

    @property
    def spark(self) -> bool:
        return self.name == "spark"

    def u64(self, value: int) -> str:
        """A CallID constant (an unsigned 64-bit value), comparable with the logs' CallIDs."""
        if self.spark:  # (the views of the logs reinterpret the 64 bits as signed: :func:`signed`)
            return str(value - _U64 if value > _I64_MAX else value)
        return f"{value}::UBIGINT"

    def array(self, items: Iterable[str]) -> str:
        """A list of the SQL expressions ``items``."""
        joined = ", ".join(items)
        return f"array({joined})" if self.spark else f"[{joined}]"

    def strings(self, values: Iterable[str]) -> str:
        return self.array(map(literal, values))

    def ints(self, values: Iterable[int]) -> str:
        """A ``BIGINT`` list of constants."""
        return f"CAST({self.array(str(int(v)) for v in values)} AS {self.type(pa.list_(pa.int64()))})"

    def doubles(self, values: Iterable[float]) -> str:
        """A ``DOUBLE`` list of exactly the floats ``values`` (decimal literals would be DECIMALs)."""
        return self.array(f"CAST('{float(v)!r}' AS DOUBLE)" for v in values)

    def struct(self, fields: dict[str, str]) -> str:
        """A struct of the SQL expressions ``fields``."""
        if self.spark:
            return "named_struct(" + ", ".join(f"{literal(k)}, {v}" for k, v in fields.items()) + ")"
        return "{" + ", ".join(f"{literal(k)}: {v}" for k, v in fields.items()) + "}"

    def at(self, items: str, index: str) -> str:
        """Element ``index`` (from 1) of list ``items``; NULL if ``index`` is NULL."""
        return f"try_element_at({items}, {index})" if self.spark else f"({items})[{index}]"

    def position(self, items: str, value: str) -> str:
        """Where ``value`` is in list ``items`` (from 1); NULL if it is not there."""
        if self.spark:
            return f"CAST(nullif(array_position({items}, {value}), 0) AS INT)"
        return f"list_position({items}, {value})"

    def size(self, items: str) -> str:
        """The length of list ``items`` (a ``BIGINT``)."""
        return f"CAST(size({items}) AS BIGINT)" if self.spark else f"len({items})"

    def filter(self, items: str, var: str, condition: str) -> str:
        """The elements ``var`` of list ``items`` for which ``condition`` holds, in order."""
        return f"filter({items}, {var} -> {condition})" if self.spark \
            else f"list_filter({items}, lambda {var}: {condition})"

    def distinct(self, items: str) -> str:
        """The distinct elements of list ``items``."""
        return f"array_distinct({items})" if self.spark else f"list_distinct({items})"

    def collect(self, value: str) -> str:
        """Aggregate: the values as a list, sorted."""
        return f"array_sort(collect_list({value}))" if self.spark else f"list_sort(list({value}))"

    def unnest(self, items: str) -> str:
        """In a ``SELECT`` list: a row per element of list ``items``."""
        return f"explode({items})" if self.spark else f"unnest({items})"

    def unnest_zip(self, source: str, lists: dict[str, str]) -> tuple[str, str]:
        """Rows per position of ``lists`` (name -> list expression) side by side (the shorter padded
        with NULLs), as columns of those names: the ``SELECT`` items and the ``FROM`` clause over
        ``source``."""
        if self.spark:
            lateral = f"LATERAL VIEW inline(arrays_zip({', '.join(lists.values())})) z AS {', '.join(lists)}"
            return ", ".join(f"z.{name}" for name in lists), f"{source} {lateral}"
        return ", ".join(f"unnest({expr}) AS {name}" for name, expr in lists.items()), source

    def type(self, t: pa.DataType) -> str:
        """The engine's name of Arrow type ``t``."""
        if pa.types.is_list(t):
            inner = self.type(t.value_type)
            return f"ARRAY<{inner}>" if self.spark else f"{inner}[]"
        if pa.types.is_struct(t):
            if self.spark:
                return "STRUCT<" + ", ".join(f"{f.name}: {self.type(f.type)}" for f in t) + ">"
            return "STRUCT(" + ", ".join(f"{f.name} {self.type(f.type)}" for f in t) + ")"
        if t == pa.uint64() and self.spark:
            return "BIGINT"
        if t == pa.string() and self.spark:
            return "STRING"
        return _TYPES[t]


_TYPES = {pa.int32(): "INTEGER", pa.int64(): "BIGINT", pa.uint64(): "UBIGINT", pa.string(): "VARCHAR",
          pa.bool_(): "BOOLEAN", pa.float64(): "DOUBLE", pa.int16(): "SMALLINT"}

def signed(value: str) -> str:
    """Spark SQL: the 64 bits of an unsigned 64-bit ``value`` (Spark reads it as ``DECIMAL(20, 0)``) as a
    ``BIGINT``, as :meth:`Dialect.u64` writes constants for Spark."""
    return f"CAST(CASE WHEN {value} > {_I64_MAX} THEN {value} - {_U64} ELSE {value} END AS BIGINT)"


DUCKDB = Dialect("duckdb")
SPARK = Dialect("spark")
