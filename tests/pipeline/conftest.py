"""Fixtures of the pipeline's tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """A merged synthetic trace (no MPI) of 100 ranks and 3 servers: more ranks than the report's heatmap
    rows.  (Some modules have their own.)"""
    from pipeline.merge import merge
    from pipeline.synth import SynthOptions, synthesize

    out = tmp_path_factory.mktemp("synth")
    synthesize(SynthOptions(ranks=100, servers=3, calls=3000, fanout=4, collective_share=0.1, seed=7), out)
    merge(str(out / "client.parquet"), str(out / "server.parquet"), str(out / "m.duckdb"))
    return out / "m.duckdb"
