"""The benchmarks' baselines measure real work (not a test of speed: their baselines must be sound)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("baseline", ["raw", "floor"])
def test_the_fs_benchmark_baselines_move_real_bytes(baseline, tmp_path):
    """``bench fs``'s baselines run to their end (the floor checks what it reads back; any
    failed process is an error, not a figure)."""
    from bench import fs

    write, read = getattr(fs, baseline)(2, 2, 64 * 1024, 256 * 1024, 4, tmp_path)
    assert write > 0 and read > 0
    assert list(tmp_path.iterdir()) == []  # the datafiles are removed
