"""Bulk appends of file rows, with the type conversions done by the database.

The loader has already checked every value (pass 1); here the rows travel as the text
the file holds and the database turns them into stored values. On SQLite (`sqlite`)
they go through one `executemany` per batch, untouched by Python; on PostgreSQL
(`postgresql`) the file's bytes are COPYed straight into the table (its stored types
parse the file's text) or, when the columns cannot be told in advance, into a staging
table converted by one INSERT ... SELECT. Both are several times faster than converting
values in Python. `interface` holds what the loader hands either of them.
"""

from __future__ import annotations

from sqlalchemy import Connection

from tally.storage.bulk_load.interface import BulkLoad
from tally.storage.bulk_load.sqlite import SqliteBulkLoad
from tally.storage.engine import backend_of
from tally.storage.resource_tables.ddl import set_file_id


def bulk_load_for(conn: Connection, table: str, *, file_id: int | None = None) -> BulkLoad:
    """The backend's bulk load into `table`; with `file_id` (a source's file) every row
    it appends gets that `_file_id`: on PostgreSQL through the column's DEFAULT, set for
    the transaction here (COPY takes no constants), on SQLite as a constant of the
    INSERT. One value a load: nothing a row costs more."""
    if backend_of(conn).is_postgresql:
        # Imported here: psycopg's import was ~6 % of `tally admin load`'s start-up on
        # SQLite, which never uses it (issue #36).
        from tally.storage.bulk_load.postgresql import PostgresBulkLoad

        if file_id is not None:
            set_file_id(conn, file_id)
        return PostgresBulkLoad(conn, table, file_id=file_id)
    return SqliteBulkLoad(conn, table, file_id=file_id)
