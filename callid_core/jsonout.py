"""JSON that JavaScript reads exactly: integers beyond 2^53 (CallIDs, times in ns) become strings.

A JavaScript reader (a browser, ``jq``, Perfetto) parses every number as a double, so a
64-bit CallID or an epoch time in nanoseconds would silently lose its last digits.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_EXACT", "dumps", "for_script"]

#: the largest integer a double holds exactly
MAX_EXACT = 2**53


def _exact(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return str(value) if abs(value) > MAX_EXACT else value
    if isinstance(value, dict):
        return {k: _exact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_exact(v) for v in value]
    return value


def dumps(value: Any) -> str:
    """``json.dumps`` with integers beyond 2^53 as strings and anything else unknown as its text."""
    return json.dumps(_exact(value), default=str)


def for_script(value: Any) -> str:
    """Compact JSON to put inside an HTML ``<script>`` element: no ``<`` at all, so no ``</script>`` or
    ``<!--`` in a value (a file name) can end or change the element."""
    return json.dumps(value, separators=(",", ":")).replace("<", "\\u003c")
