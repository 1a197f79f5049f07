"""Outputs never destroy inputs: a command refuses to write over one of its inputs, or over an existing
path that is not an output of the same kind callid wrote (unless ``--force``).

callid recognises what it wrote by content: its logs and tables (Parquet with callid's metadata, or a
merged output's tables), merged DuckDB databases, its pages (their title), its traces (the Chrome
trace's ``otherData``, the Perfetto trace's track names, the OTF2 archive's creator) and the
configuration of its file systems.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from callid_core.errors import InputError

__all__ = ["LOG", "MERGED", "PAGE", "CHROME", "PERFETTO", "OTF2", "CONFIG", "RUN_CONFIG", "DATA_SUFFIX",
           "guard_output", "kind_of"]

# The kinds of output callid writes (CONFIG: of callid fs init, its servers' homes named; RUN_CONFIG: the
# one a run writes for its own servers, started and stopped with it)
LOG, MERGED, PAGE = "log", "merged output", "page"
CONFIG, RUN_CONFIG = "file-system configuration", "run's file-system configuration"
CHROME, PERFETTO, OTF2 = "Chrome trace", "Perfetto trace", "OTF2 archive"

#: a merged DuckDB output ``X`` keeps its logs and stored tables in the directory ``X`` + this
DATA_SUFFIX = ".data"

_SNIFF = 64 * 1024
#: what each kind of file callid writes starts with, and holds near its start or its end
_MARKERS = (
    (PAGE, b"<!doctype html>", b"<title>callid "),  # callid view, callid report
    (CHROME, b'{"traceEvents":[', b'"otherData":{"tool":"callid"'),  # (at the end)
    (PERFETTO, b"\n", b"MPI ranks"),  # a TracePacket, then the tracks' names
    (CONFIG, b"{", b'"callid_layout"'),  # a file system's configuration (fs.json)
)


def guard_output(out: str | os.PathLike[str], kind: str, inputs: Iterable[str | os.PathLike[str]] = (),
                 force: bool = False) -> None:
    """Raise :class:`InputError` if ``out`` is (or holds) one of ``inputs`` by any path (the same file
    through a link included), lies in a merged output's data, is not a regular file or directory (a
    device, a FIFO), or exists and is not an output of ``kind`` callid wrote (an empty directory is
    fine) and ``force`` is not given (``force`` replaces a file, never a directory of another kind)."""
    out = Path(out)
    target = out.resolve()
    same = _identity(target)
    for inp in inputs:
        inp = Path(inp).resolve()
        if inp == target or target in inp.parents or (same and same in _identities(inp)):
            raise InputError(f"{out}: is an input of this command ({inp}); write the output elsewhere")
    owner = _merged_owner(target)
    if owner:
        raise InputError(f"{out}: is part of the merged output {owner}; write the output elsewhere")
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return
    if not (out.is_file() or out.is_dir()):
        raise InputError(f"{out}: exists and is not a regular file (a device, a FIFO or a socket); choose "
                         "another name")
    found = kind_of(out)
    if found == kind or (force and not out.is_dir()):
        return
    what = f"is callid's {found}, not a {kind}" if found else "was not written by callid"
    fix = "" if out.is_dir() else ", or add --force to replace it"
    raise InputError(f"{out}: exists and {what}; choose another name{fix}")


def _identity(path: Path) -> tuple[int, int] | None:
    """The device and inode of ``path`` (a file's links share them), None if it does not exist."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _identities(path: Path) -> set[tuple[int, int]]:
    """The identities of ``path``, and of every file under it if it is a directory."""
    files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
    return {i for i in map(_identity, files) if i}


def _merged_owner(target: Path) -> Path | None:
    """The merged output whose logs or tables ``target`` would be among (its data directory, or a
    ``--storage parquet`` directory), else None."""
    for parent in target.parents:
        db = Path(str(parent).removesuffix(DATA_SUFFIX))
        if parent.name.endswith(DATA_SUFFIX) and db.is_file() and kind_of(db) == MERGED:
            return db
        if (parent / "run.parquet").is_file() and kind_of(parent) == MERGED:
            return parent
    return None


def kind_of(path: str | os.PathLike[str]) -> str | None:
    """The kind of output callid wrote ``path`` as (a file or a directory), or None."""
    path = Path(path)
    if path.is_dir():
        names = {p.name for p in path.iterdir()}
        if "run.parquet" in names and _callid_parquet(path / "run.parquet", merged=True):
            return MERGED  # (--storage parquet)
        if "traces.otf2" in names and b"callid" in _head(path / "traces.otf2"):
            return OTF2
        return None
    if not path.is_file():
        return None
    head = _head(path)
    if head.startswith(b"PAR1"):
        return LOG if _callid_parquet(path) else None
    if head[8:12] == b"DUCK":
        return MERGED if _callid_database(path) else None
    tail = _tail(path)
    kind = next((kind for kind, start, mark in _MARKERS
                 if head.startswith(start) and (mark in head or mark in tail)), None)
    return _config_kind(path) if kind == CONFIG else kind


def _config_kind(path: Path) -> str | None:
    """CONFIG if the configuration at ``path`` is a file system's of callid fs init (its servers have
    homes of their own, its secret is beside it), RUN_CONFIG if it is a run's (its own servers, or those
    of a file system it ran on, whose secret is elsewhere), None if it is not one."""
    import json

    from callid_core.config import secret_beside

    try:
        homes = any(s.get("home") for s in json.loads(path.read_text())["servers"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    own_secret = secret_beside(path).exists()
    return CONFIG if homes and own_secret else RUN_CONFIG


def _head(path: Path) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(_SNIFF)


def _tail(path: Path) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(max(0, path.stat().st_size - _SNIFF))
        return fh.read()


def _callid_parquet(path: Path, merged: bool = False) -> bool:
    """A log callid wrote (its key/value metadata), or a table of a merged output (``merged``)."""
    import pyarrow.parquet as pq

    from callid_core.schema import META_KIND

    try:
        schema = pq.read_schema(path)
    except Exception:  # noqa: BLE001 (anything unreadable is not ours)
        return False
    if merged:
        return schema.names == ["key", "value"]
    return META_KIND.encode() in (schema.metadata or {})


def _callid_database(path: Path) -> bool:
    """A DuckDB database with the tables of a merged output."""
    import duckdb

    try:
        with duckdb.connect(str(path), read_only=True) as con:
            names = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    except duckdb.Error:
        return False
    return {"run", "arrows"} <= names
