"""One spelling of a file's name: ``/pvfs2/./x``, ``/pvfs2//x`` and ``pvfs2://pvfs2/x`` are one file.

ROMIO reads a file system's name before a colon as the driver to use (``pvfs2:/pvfs2/x``,
``ufs:/tmp/x``); the file is the rest.  The log keeps a file's one spelling, so that what is
opened under one name and deleted under another is seen as the same file (check F101).
"""

from __future__ import annotations

import os
import posixpath

__all__ = ["ROMIO_PREFIXES", "canonical"]

#: the file-system names ROMIO takes before a file's name (ad_fstype.c)
ROMIO_PREFIXES = frozenset({
    "bg", "bgl", "daos", "ftp", "gpfs", "gsiftp", "hfs", "ime", "lustre", "nfs", "panfs", "pfs", "piofs",
    "pvfs", "pvfs2", "quobytefs", "sfs", "testfs", "ufs", "xfs", "zoidfs"})


def canonical(name: str, cwd: str | None = None) -> str:
    """The one spelling of the file ``name``: its ROMIO prefix removed (``pvfs2:``; lower case, as
    ROMIO compares it), ``.``, ``..`` and repeated slashes resolved (as the names read, not following
    links), relative to ``cwd`` if given (else a relative name stays relative)."""
    head, colon, rest = name.partition(":")
    path = rest if colon and head in ROMIO_PREFIXES else name
    if cwd is not None and path and not path.startswith("/"):
        path = os.path.join(cwd, path)
    path = posixpath.normpath(path) if path else path
    return "/" + path.lstrip("/") if path.startswith("//") else path  # (POSIX keeps a leading "//")
