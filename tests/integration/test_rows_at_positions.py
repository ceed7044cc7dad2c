"""Rows read by their 1-based positions (what manual actions name), both backends: read
by their ids when the table's ids run without a gap, numbered otherwise, the same rows
either way; a gap (a row removed) is never read as dense."""

from __future__ import annotations

import sqlalchemy as sa

from support.factories import make_source, make_tenant
from tally.runtime import Runtime
from tally.storage import resources
from tally.storage.resource_tables.ddl import ROW_ID, row_table
from tally.storage.resource_tables.source_rows import rows_at

CSV = "reference,amount\n" + "".join(f"R-{n},{n}.25\n" for n in range(1, 41))
POSITIONS = [1, 2, 17, 39, 40, 41, 0]


def test_positions_read_by_id_equal_the_numbered_rows_and_a_gap_is_numbered(
    runtime: Runtime,
) -> None:
    source = make_source(runtime.engine, make_tenant(runtime.engine), CSV)
    with runtime.engine.begin() as conn:
        found = resources.get_resource(conn, source.id)
        table, columns = found.table_name, found.columns
        numbered = rows_at(conn, table, columns, POSITIONS)
        dense = rows_at(conn, table, columns, POSITIONS, row_count=found.row_count)
        assert dense == numbered
        assert sorted(dense) == [1, 2, 17, 39, 40]
        assert dense[17][1][0] == "R-17"
        rows = row_table(table, columns)
        conn.execute(sa.delete(rows).where(rows.c[ROW_ID] == numbered[17][0]))
        gapped = rows_at(conn, table, columns, POSITIONS, row_count=found.row_count - 1)
        assert gapped == rows_at(conn, table, columns, POSITIONS)
        assert gapped[17][1][0] == "R-18"
        assert 40 not in gapped
