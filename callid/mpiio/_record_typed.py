"""Generated from the client log's columns (callid_core.schema.CLIENT) by
``python -m callid.mpiio.record > callid/mpiio/_record_typed.py``: do not edit.

``callid.mpiio.record.Record`` as type checkers see it (the class itself is built at run time).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["Record"]


class Record:
    """One call's client log row being filled in: every column of the client log an attribute."""

    callid: int
    rank: int
    thread: int | None
    clock: str
    kind: str
    func: str
    file: str | None
    fid: int | None
    offset: int | None
    size: int | None
    count: int | None
    datatype: str | None
    bytes: int | None
    collective: bool | None
    coll_seq: int | None
    rid: int | None
    t_start: int
    t_end: int
    error: str | None
    hints: str | None
    amode: str | None
    comm_size: int | None
    comm_id: int | None
    peer: int | None
    tag: int | None
    root: int | None
    depth: int | None
    members: Sequence[int]
    type_ids: Sequence[int]
    type_id: int | None
    integers: Sequence[int]
    addresses: Sequence[int]
    types: Sequence[int]
    etype: str | None
    etype_extent: int | None
    filetype: str | None
    extent: int | None
    datarep: str | None
    type_issues: str | None
    whence: str | None
    relative_offset: int | None
    file_size: int | None
    atomicity: bool | None
    region_offsets: Sequence[int]
    region_lengths: Sequence[int]
    origin: str | None
    inferred: str | None
    src_t_start: int | None
    src_t_end: int | None
    lag: int | None
    server: str | None
    op: str | None
    req_seq: int | None
    t_recv: int | None
    t_send: int | None
    callids: Sequence[int]

    def __init__(
        self,
        callid: int | None = None,
        rank: int | None = None,
        thread: int | None = None,
        clock: str | None = None,
        kind: str = 'call',
        func: str | None = None,
        file: str | None = None,
        fid: int | None = None,
        offset: int | None = None,
        size: int | None = None,
        count: int | None = None,
        datatype: str | None = None,
        bytes: int | None = None,
        collective: bool | None = None,
        coll_seq: int | None = None,
        rid: int | None = None,
        t_start: int | None = None,
        t_end: int | None = None,
        error: str | None = None,
        hints: str | None = None,
        amode: str | None = None,
        comm_size: int | None = None,
        comm_id: int | None = None,
        peer: int | None = None,
        tag: int | None = None,
        root: int | None = None,
        depth: int | None = None,
        members: Sequence[int] = (),
        type_ids: Sequence[int] = (),
        type_id: int | None = None,
        integers: Sequence[int] = (),
        addresses: Sequence[int] = (),
        types: Sequence[int] = (),
        etype: str | None = None,
        etype_extent: int | None = None,
        filetype: str | None = None,
        extent: int | None = None,
        datarep: str | None = None,
        type_issues: str | None = None,
        whence: str | None = None,
        relative_offset: int | None = None,
        file_size: int | None = None,
        atomicity: bool | None = None,
        region_offsets: Sequence[int] = (),
        region_lengths: Sequence[int] = (),
        origin: str | None = None,
        inferred: str | None = None,
        src_t_start: int | None = None,
        src_t_end: int | None = None,
        lag: int | None = None,
        server: str | None = None,
        op: str | None = None,
        req_seq: int | None = None,
        t_recv: int | None = None,
        t_send: int | None = None,
        callids: Sequence[int] = (),
    ) -> None:
        """Columns by keyword (or the first ones by position); the schema's defaults for the rest."""
