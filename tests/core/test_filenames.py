"""One spelling of a file's name, as the log keeps it."""

from __future__ import annotations

import pytest

from callid_core.filenames import canonical


@pytest.mark.parametrize(("name", "cwd", "one"), [
    ("/pvfs2/x", None, "/pvfs2/x"), ("/pvfs2/./x", None, "/pvfs2/x"), ("/pvfs2//x", None, "/pvfs2/x"),
    ("pvfs2://pvfs2/x", None, "/pvfs2/x"), ("pvfs2:/pvfs2/x", None, "/pvfs2/x"),
    ("PVFS2:/pvfs2/x", None, "PVFS2:/pvfs2/x"),  # (ROMIO's prefixes are lower case)
    ("ufs:/tmp/../tmp/y/", None, "/tmp/y"), ("///pvfs2///x", None, "/pvfs2/x"),
    ("out/x", "/home/u", "/home/u/out/x"), ("pvfs2:x", "/pvfs2", "/pvfs2/x"), ("out/./x", None, "out/x"),
    ("c:/data/x", None, "c:/data/x"), ("a:b", "/w", "/w/a:b"),  # (not a file system's prefix: a name)
    ("", None, ""),
])
def test_spellings_of_one_file_are_one_name(name, cwd, one):
    assert canonical(name, cwd) == one
