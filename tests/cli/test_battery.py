"""The command-line battery (tests/cli/battery.py): no traceback, hang, leftover process, overwritten
input or silently accepted bad value, on any case."""

from __future__ import annotations

import pytest

from tests.cli.battery import CASES, Case, describe, make_workspace, run_case

pytestmark = [pytest.mark.mpi, pytest.mark.slow]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    return make_workspace(tmp_path_factory.mktemp("battery"))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case, workspace, tmp_path):
    outcome = run_case(case, workspace, tmp_path)
    assert outcome.clean, describe(outcome)
