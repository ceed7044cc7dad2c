"""Files of several chunks, whose lines pass 1 matches without parsing them
(services/loader/chunks.py), on both backends: the rows as written, the types the
whole file settles, and a bad line past the first chunk fails the load whole."""

from __future__ import annotations

from decimal import Decimal

import pytest
from test_loader_errors import create_fails

from support.factories import CHUNKED_EARLY, Tenant, chunked_csv, read_data, write_file
from tally.core.columns import ColumnType
from tally.runtime import Runtime


def test_rows_of_matched_chunks_load_as_written(runtime: Runtime, tenant: Tenant) -> None:
    late = ['90001,2024-02-29,1.125,"a ""quoted"" memo"', '90002,2024-03-01,2.5,"two\nlines"']
    path = write_file(chunked_csv(*late))
    try:
        result = runtime.catalogue.create_source_from_file(
            workspace_id=tenant.workspace_id, name="chunks", path=path
        )
    finally:
        path.unlink()
    assert result.rows == 90_002
    types = {c.name: (c.type, c.scale) for c in result.resource.columns}
    assert types == {
        "id": (ColumnType.INTEGER, 0),
        "day": (ColumnType.DATE, 0),
        "amount": (ColumnType.DECIMAL, 3),  # widened by a line past the first chunk
        "memo": (ColumnType.TEXT, 0),
    }
    first = read_data(runtime, tenant, result.resource.id, ordering="id", page_size=200)
    last = read_data(runtime, tenant, result.resource.id, ordering="-id", page_size=3)
    assert first[149]["memo"] == "Shop 3, Ltd"
    assert first[149]["amount"] == Decimal("150.500")
    assert [row["id"] for row in last] == [90_002, 90_001, 90_000]
    assert [row["memo"] for row in last[:2]] == ["two\nlines", 'a "quoted" memo']
    assert last[2]["day"] == "2024-01-10"


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("7,2024-01-01,1.00", "expected 4 fields, found 3"),
        ('7,2024-01-01,1.00,"a"b', "malformed CSV"),
    ],
)
def test_a_bad_line_past_the_first_chunk_loads_nothing(
    runtime: Runtime, tenant: Tenant, bad: str, reason: str
) -> None:
    error = create_fails(runtime, tenant, chunked_csv(bad))
    assert reason in str(error)
    assert error.line == CHUNKED_EARLY + 2


def test_a_new_tables_row_ids_go_on_after_its_first_file(
    runtime: Runtime, tenant: Tenant, backend: str
) -> None:
    """PostgreSQL fills a new table with row ids its session caches and a constant
    `_file_id` (storage/resource_tables/ddl.py, `prepare_fill`): afterwards the
    table's ids and defaults are as if each row had been given its own."""
    path = write_file("id,memo\n1,a\n2,b\n3,c\n")
    try:
        source = runtime.catalogue.create_source_from_file(
            workspace_id=tenant.workspace_id, name="ids", path=path
        ).resource
        runtime.catalogue.append_file(source.id, path)
    finally:
        path.unlink()
    table = source.table_name
    with runtime.engine.connect() as conn:
        ids = conn.exec_driver_sql(f"SELECT _row_id, _file_id FROM {table} ORDER BY 1").all()
        assert [tuple(row) for row in ids] == [(n, None) for n in range(1, 7)]
        if backend == "postgresql":
            cache, default = conn.exec_driver_sql(
                "SELECT s.seqcache, pg_get_expr(d.adbin, d.adrelid) FROM pg_sequence s, "
                "pg_attrdef d JOIN pg_attribute a ON (a.attrelid, a.attnum) = "
                "(d.adrelid, d.adnum) WHERE s.seqrelid = "
                f"pg_get_serial_sequence('{table}', '_row_id')::regclass "
                f"AND d.adrelid = '{table}'::regclass AND a.attname = '_file_id'"
            ).one()
            assert cache == 1
            assert "current_setting('tally.file_id'" in default
