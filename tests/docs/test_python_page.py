"""docs/python.md's session runs and prints what the page shows; the API it shows is the package's."""

from __future__ import annotations

import doctest

import pytest

import callid
from callid import api
from tests.conftest import ROOT


def test_the_package_gives_the_api_each_name_documented():
    assert set(callid.__all__) == set(api.__all__) - {"run", "replay"}  # (callid.run: the module)
    assert all(getattr(callid, name) is getattr(api, name) for name in callid.__all__)
    assert all(getattr(api, name).__doc__ for name in api.__all__)
    with pytest.raises(AttributeError):
        callid.nothing  # noqa: B018


@pytest.mark.slow
@pytest.mark.mpi
def test_the_session_prints_what_the_page_shows(tmp_path, monkeypatch):
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    result = doctest.testfile(str(ROOT / "docs" / "python.md"), module_relative=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 15 and result.failed == 0
