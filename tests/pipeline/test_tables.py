"""The merged tables are declared once (callid_core.tables); the reference and the merge follow."""

from __future__ import annotations

import duckdb
import pytest

from callid_core.errors import Failed
from callid_core.tables import MERGED, reference_markdown
from pipeline.merge import check_tables
from tests.conftest import ROOT

DOC = ROOT / "docs" / "tables.md"


def test_the_table_reference_is_current():
    assert DOC.read_text() == reference_markdown(), (
        "docs/tables.md is stale: python -m callid_core.tables > docs/tables.md")


def test_every_column_has_a_doc_and_every_time_a_unit():
    for table in MERGED.values():
        for column in table.columns:
            assert column.doc, f"{table.name}.{column.name} has no doc"
            if column.name.startswith("t_") or column.name.endswith("_ns"):
                assert column.unit == "ns", f"{table.name}.{column.name} has no unit"


def _declared(con, skip: str = "", retype: str = "") -> None:
    from pipeline.dialect import DUCKDB

    for name, table in MERGED.items():
        cols = []
        for c in table.columns:
            if f"{name}.{c.name}" == skip:
                continue
            kind = "VARCHAR" if f"{name}.{c.name}" == retype else DUCKDB.type(c.type)
            cols.append(f'"{c.name}" {kind}')
        con.execute(f"CREATE TABLE {name} ({', '.join(cols)})")


def test_the_merge_check_accepts_the_declarations_and_names_a_difference():
    con = duckdb.connect()
    _declared(con)
    check_tables(con)
    for skip, retype, said in (("arrows.n_callids", "", "arrows"), ("", "fanout.disk_ops", "disk_ops")):
        con = duckdb.connect()
        _declared(con, skip, retype)
        with pytest.raises(Failed, match=said):
            check_tables(con)
