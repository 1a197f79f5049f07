"""Perfetto's native protobuf trace: TrackEvent slices with flows, built with the ``perfetto``
package's generated protobuf classes (``perfetto_trace_pb2``) and written as a stream.

* **Tracks** (:mod:`pipeline.tracks`): a parent track per process (``MPI ranks``, ``server io0``,
  children in explicit order) and a child track per thread (rank, server layer, and their lanes for
  events overlapping in time: slices on one track must nest).  A ``TrackDescriptor`` is written when
  a track is made, before its first event.
* **Slices**: a ``TYPE_SLICE_BEGIN`` / ``TYPE_SLICE_END`` pair per call and server event, at its
  start and end in ns on callid's reference clock (the database's ``t_start``, ``t_end``; an empty
  event lasts 1 ns), named after the function or operation, with the CallID as a debug annotation
  (``callid``; ``callids`` when a server event serves several calls).  Event names, categories and
  annotation names are interned.
* **Arrows**: one flow id per arrow: in ``flow_ids`` of the begin of the source slice (the call, or
  the aggregator's call: see :mod:`pipeline.export`) and in ``terminating_flow_ids`` of the begin of
  the disk operation (of its end when the operation began before the source slice: Perfetto links
  a flow in time order, so its end must not come first).  The calls are written before the server
  events, so at equal times a source comes first.
* **Stream**: a ``Trace`` is a repeated field of ``TracePacket``; each batch of slices is one
  ``Trace`` message serialised and appended (concatenated messages parse as one).
"""

from __future__ import annotations

from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from pipeline.trace_stream import Progress, Source, columns
from pipeline.tracks import RANKS_PID, Thread

__all__ = ["CHUNK", "SEQUENCE", "write_perfetto"]

#: the trusted packet sequence id of every packet
SEQUENCE = 1
#: slices per Trace message serialised (its packets are Python objects until then)
CHUNK = 4096
#: debug annotation names, interned once (iids from 1)
ANNOTATIONS = ("callid", "callids", "file", "offset", "size", "bytes", "event_id", "rank")
_A = {name: i + 1 for i, name in enumerate(ANNOTATIONS)}

_BEGIN, _END = pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_SLICE_END
_NEEDS_STATE = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE


def write_perfetto(src: Source, fh: BinaryIO, on_progress: Progress | None = None) -> dict:
    """Write the protobuf trace of ``src`` to ``fh``; return ``packets``."""
    w = _Writer(src, fh, on_progress)
    w.header()
    for batch in src.calls():
        tids = src.layout.rank_threads(*columns(batch, "rank", "t_start", "t_end"))
        w.calls(batch, tids)
    for batch in src.ops():
        tids = src.layout.op_threads(*columns(batch, "track", "t_start", "t_end"))
        w.ops(batch, tids)
    return {"packets": w.packets}


def process_uuid(pid: int) -> int:
    """The track uuid of a process's parent track (threads: :attr:`pipeline.tracks.Thread.uuid`)."""
    return pid << 32


class _Writer:
    """The packets of one trace: one sequence, its interned names, a Trace message per chunk."""

    def __init__(self, src: Source, fh: BinaryIO, on_progress: Progress | None) -> None:
        self.src, self.fh, self.on_progress = src, fh, on_progress
        self.names: dict[str, int] = {}  # interned event names and categories
        self.categories: dict[str, int] = {}
        self.packets = 0
        self.done = 0
        if on_progress:
            on_progress(0, src.total)

    def header(self) -> None:
        """The sequence's first packet (interned annotation names) and the processes' tracks."""
        trace = pb.Trace()
        p = trace.packet.add()
        p.trusted_packet_sequence_id = SEQUENCE
        p.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
        p.first_packet_on_sequence = True
        for name, iid in _A.items():
            p.interned_data.debug_annotation_names.add(iid=iid, name=name)
        procs = [(pid, name) for pid, name in self.src.layout.processes()
                 if pid != RANKS_PID or self.src.n_calls + self.src.n_mpi]
        for pid, name in procs:
            q = trace.packet.add()
            q.trusted_packet_sequence_id = SEQUENCE
            d = q.track_descriptor
            d.uuid, d.name, d.sibling_order_rank = process_uuid(pid), name, pid
            d.child_ordering = pb.TrackDescriptor.EXPLICIT
        self._write(trace)

    def calls(self, batch: pa.Table, tids: np.ndarray) -> None:
        trace = self._start(batch, "func", ["mpi"])
        names = self._iids(batch.column("func"), self.names)
        cat = self.categories["mpi"]
        uuids = (np.int64(RANKS_PID) << 32 | tids).tolist()
        ts, te, cid, file, off, size, nbytes, flows = _lists(batch, "t_start", "t_end", "callid_hex", "file",
                                                             "file_offset", "size", "bytes", "flow_ids")
        add = trace.packet.add
        for i in range(batch.num_rows):
            if i and not i % CHUNK:
                trace = self._write(trace)
                add = trace.packet.add
            e = _begin(add, ts[i], uuids[i], names[i], cat)
            if cid[i] is not None:
                a = e.debug_annotations
                a.add(name_iid=_A["callid"], string_value=cid[i])
                if file[i] is not None:
                    a.add(name_iid=_A["file"], string_value=file[i])
                if off[i] is not None:
                    a.add(name_iid=_A["offset"], int_value=off[i])
                if size[i] is not None:
                    a.add(name_iid=_A["size"], int_value=size[i])
                if nbytes[i] is not None:
                    a.add(name_iid=_A["bytes"], int_value=nbytes[i])
            if flows[i]:
                e.flow_ids.extend(flows[i])
            _end(add, te[i], uuids[i])
        self._finish(trace, batch.num_rows)

    def ops(self, batch: pa.Table, tids: np.ndarray) -> None:
        trace = self._start(batch, "op", None)
        names = self._iids(batch.column("op"), self.names)
        cats = self._iids(batch.column("layer"), self.categories)
        uuids = (columns(batch, "pid")[0].astype(np.int64) << 32 | tids).tolist()
        ts, te, cid, cids, eid, size, rank, flows, at_end = _lists(
            batch, "t_start", "t_end", "callid_hex", "callids", "event_id", "size", "rank", "flow_ids",
            "flow_at_end")
        add = trace.packet.add
        for i in range(batch.num_rows):
            if i and not i % CHUNK:
                trace = self._write(trace)
                add = trace.packet.add
            e = _begin(add, ts[i], uuids[i], names[i], cats[i])
            a = e.debug_annotations
            if cids[i] is not None:
                a.add(name_iid=_A["callids"], string_value=",".join(cids[i]))
            elif cid[i] is not None:
                a.add(name_iid=_A["callid"], string_value=cid[i])
            a.add(name_iid=_A["event_id"], int_value=eid[i])
            if size[i] is not None:
                a.add(name_iid=_A["size"], int_value=size[i])
            if rank[i] is not None and rank[i] >= 0:
                a.add(name_iid=_A["rank"], int_value=rank[i])
            q = _end(add, te[i], uuids[i])
            if flows[i]:
                ends = at_end[i]
                if any(ends):
                    q.terminating_flow_ids.extend(f for f, x in zip(flows[i], ends) if x)
                    e.terminating_flow_ids.extend(f for f, x in zip(flows[i], ends) if not x)
                else:
                    e.terminating_flow_ids.extend(flows[i])
        self._finish(trace, batch.num_rows)

    def _start(self, batch: pa.Table, name_col: str, categories: list[str] | None) -> pb.Trace:
        """A batch's Trace: the descriptors of the tracks made, and the names not interned yet."""
        trace = pb.Trace()
        for t in self.src.layout.take_new():
            self._track(trace, t)
        p = trace.packet.add()
        p.trusted_packet_sequence_id = SEQUENCE
        p.sequence_flags = _NEEDS_STATE
        for name in pc.unique(batch.column(name_col)).to_pylist():
            if name not in self.names:
                self.names[name] = iid = len(self.names) + 1
                p.interned_data.event_names.add(iid=iid, name=name)
        for name in categories or pc.unique(batch.column("layer")).to_pylist():
            if name not in self.categories:
                self.categories[name] = iid = len(self.categories) + 1
                p.interned_data.event_categories.add(iid=iid, name=name)
        if not p.HasField("interned_data"):
            del trace.packet[-1]
        return trace

    def _track(self, trace: pb.Trace, t: Thread) -> None:
        p = trace.packet.add()
        p.trusted_packet_sequence_id = SEQUENCE
        d = p.track_descriptor
        d.uuid, d.parent_uuid, d.name, d.sibling_order_rank = t.uuid, process_uuid(t.pid), t.name, t.sort

    @staticmethod
    def _iids(column: pa.Array, interned: dict[str, int]) -> list[int]:
        """The interned ids of a column of names (all interned already)."""
        keys = pa.array(list(interned), pa.string())
        idx = pc.index_in(column, value_set=keys).to_numpy(zero_copy_only=False)
        return (np.arange(1, len(keys) + 1)[idx.astype(np.int64)]).tolist()

    def _finish(self, trace: pb.Trace, rows: int) -> None:
        self._write(trace)
        self.done += rows
        if self.on_progress:
            self.on_progress(self.done, self.src.total)

    def _write(self, trace: pb.Trace) -> pb.Trace:
        """Append ``trace``'s packets to the file; return a new, empty Trace."""
        self.packets += len(trace.packet)
        self.fh.write(trace.SerializeToString())
        return pb.Trace()


def _lists(batch: pa.Table, *names: str) -> list[list]:
    return [batch.column(name).to_pylist() for name in names]


def _begin(add, ts: int, uuid: int, name_iid: int, category_iid: int):
    """A slice's begin packet (its TrackEvent, to annotate)."""
    p = add()
    p.timestamp = ts
    p.trusted_packet_sequence_id = SEQUENCE
    p.sequence_flags = _NEEDS_STATE
    e = p.track_event
    e.type = _BEGIN
    e.track_uuid = uuid
    e.name_iid = name_iid
    e.category_iids.append(category_iid)
    return e


def _end(add, ts: int, uuid: int):
    """A slice's end packet (its TrackEvent)."""
    q = add()
    q.timestamp = ts
    q.trusted_packet_sequence_id = SEQUENCE
    q.track_event.type = _END
    q.track_event.track_uuid = uuid
    return q.track_event
