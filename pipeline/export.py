"""``callid export``: the merged trace (or a selection of it) for other viewers.

Formats: ``chrome`` (trace-event JSON, :mod:`pipeline.export_chrome`), ``perfetto`` (Perfetto's
protobuf trace, :mod:`pipeline.export_perfetto`) and ``otf2`` (:mod:`pipeline.export_otf2`).

What chrome and perfetto share (what is exported, where flows start and end, streaming) is
:mod:`pipeline.trace_stream`; their tracks are :mod:`pipeline.tracks`.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import duckdb

from callid_core.atomic import check_space, replacing
from callid_core.choices import TraceFormat
from callid_core.errors import BadValue, InputError
from pipeline.merged import Merged
from pipeline.selection import Selection
from pipeline.trace_stream import MEMORY_LIMIT, Progress, Source

__all__ = ["write_trace"]

#: bytes of output per slice and per flow, to check the free space before writing
EST_BYTES = {"chrome": (280, 120), "perfetto": (120, 8)}


def write_trace(m: Merged, out: str, fmt: str, sel: Selection, on_progress: Progress | None = None) -> dict:
    """Write the selection of ``m`` as a ``fmt`` trace (chrome, perfetto, otf2) to ``out``; return
    ``output``, ``format``, ``events`` (slices: calls and server events), ``arrows``, ``bytes``,
    ``threads`` (tracks), ``arrows_backwards`` and ``seconds``.  ``on_progress(done, total)``
    counts slices written."""
    if fmt == TraceFormat.OTF2.value:
        from pipeline.export_otf2 import write_otf2

        return write_otf2(m, out, sel, on_progress)
    if fmt == TraceFormat.CHROME.value:
        from pipeline.export_chrome import write_chrome as write
    elif fmt == TraceFormat.PERFETTO.value:
        from pipeline.export_perfetto import write_perfetto as write
    else:
        raise BadValue(f"unknown trace format {fmt!r}: choose chrome, perfetto or otf2")
    started = time.monotonic()
    out_path = Path(out)
    src = None
    with replacing(out_path) as tmp, tempfile.TemporaryDirectory(prefix="export-", dir=m.scratch) as scratch:
        try:
            with m.settings(memory_limit=MEMORY_LIMIT):
                src = Source.open(m.con, sel, scratch)
                per_slice, per_flow = EST_BYTES[fmt]
                check_space(out_path, src.total * per_slice + src.n_arrows * per_flow, "the trace")
                with open(tmp, "wb") as fh:
                    summary = write(src, fh, on_progress)
        except OSError as exc:
            raise InputError(f"{out}: cannot write ({exc.strerror or exc})") from None
        except duckdb.OutOfMemoryException:
            raise sel.too_big() from None
        except duckdb.IOException as exc:  # (e.g. no room left to sort on disk)
            raise InputError(f"{out}: export failed: {str(exc).splitlines()[0]}") from None
        finally:
            if src is not None:
                src.close()
    return {"output": str(out_path), "format": fmt, "events": src.total, "calls": src.n_calls + src.n_mpi,
            "server_events": src.n_ops, "arrows": src.n_arrows, "arrows_backwards": src.n_backwards,
            "threads": len(src.layout.threads), "bytes": out_path.stat().st_size,
            "seconds": round(time.monotonic() - started, 3), **summary}
