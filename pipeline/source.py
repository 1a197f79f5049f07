"""What a merged replay says of its source: the job (as the Darshan log records it), the notes of the
replay (an incomplete log, what was inferred), and how much of the job's I/O the log holds.

The replay writes them into the client log's metadata (``callid.job.*``, ``callid.source_notes``:
``callid_core.schema``); the merged ``run`` table has them as ``client.job.*`` and
``client.source_notes``.  ``callid stats``, ``insights`` and ``report`` show them beside the replay's
own figures.
"""

from __future__ import annotations

import json

from callid_core.evidence import DXT_LAYERS
from callid_core.schema import META_JOB_PREFIX
from callid_core.units import human_size

__all__ = ["PAYLOAD_NONE_TIMES", "SIDE_BY_SIDE", "in_the_job", "job_of", "job_side", "job_text", "notes_of",
           "sample_text"]

#: what the times of a payload-free file system (callid replay/run --payload none) measure
PAYLOAD_NONE_TIMES = ("no data moved or was stored (sizes only): every time measures the simulator "
                      "moving no data, not the job's I/O")
_JOB = "client." + META_JOB_PREFIX.removeprefix("callid.")  # (the run table's name of the client's keys)
#: the figures of one layer the job and the replay are compared on: key, label
SIDE_BY_SIDE = (("bytes_read", "bytes read"), ("bytes_written", "bytes written"), ("reads", "reads"),
                ("writes", "writes"), ("read_span_s", "reads: first start to last end (s)"),
                ("write_span_s", "writes: first start to last end (s)"))


def job_of(run: dict[str, str]) -> dict[str, str]:
    """The source's job (``run``: the run table as a dict; empty: no job recorded)."""
    return {k.removeprefix(_JOB): v for k, v in run.items() if k.startswith(_JOB)}


def notes_of(run: dict[str, str]) -> list[str]:
    """What the replay said of its source (an incomplete log, what it inferred)."""
    return json.loads(run.get("client.source_notes") or "[]")


def sample_text(job: dict[str, str]) -> str | None:
    """'on 65,529 of the 1,000,000 reads the job made ...' when the log holds fewer operations than its
    counters count; None when it holds them all (or says nothing of them)."""
    parts = []
    for io in ("read", "write"):
        held, counted = int(job.get(f"sample.{io}s_held", 0)), int(job.get(f"sample.{io}s_counted", 0))
        if held < counted:
            parts.append(f"{held:,} of the {counted:,} {io}s")
    return f"on {' and '.join(parts)} the job made (the log holds only those)" if parts else None


def job_text(job: dict[str, str]) -> str:
    """The job in one line."""
    where = f"{job.get('nprocs', '?')} ranks on {job.get('hosts', '?')} hosts"
    return (f"job {job.get('jobid', '?')}: {job.get('exe') or '(no executable recorded)'}; {where}; "
            f"started {job.get('start', '?')}, ran {job.get('run_time_s', '?')} s; Darshan "
            f"{job.get('darshan_version', '?')}, modules {job.get('modules', '?')}")


def job_side(job: dict[str, str], origin: str | None) -> tuple[str, dict[str, float]] | None:
    """The layer the replay took its calls from (``origin``: the most common origin of its calls) and
    the job's figures of it (:data:`SIDE_BY_SIDE`); None without them."""
    layer = DXT_LAYERS.get(origin or "")
    figures = {k: float(job[f"{layer}.{k}"]) for k, _ in SIDE_BY_SIDE if f"{layer}.{k}" in job}
    return (layer, figures) if layer and figures else None


def in_the_job(layer: str, figures: dict[str, float]) -> str:
    """'in the job (MPI-IO): 2.0 GiB written over 6.0 s, ...'."""
    parts = [f"{human_size(int(figures[f'bytes_{d}']))} {d} over {figures.get(f'{io}_span_s', 0):.3g} s"
             for io, d in (("write", "written"), ("read", "read")) if figures.get(f"bytes_{d}")]
    return f"in the job ({layer}): " + ("; ".join(parts) or "no data moved")
