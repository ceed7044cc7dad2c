"""The rows of a reconciliation's published output that an incremental run replaces:
read in its snapshot (to adjust last_run's counts), deleted in its patch transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy import Connection

from tally.core.columns import Column
from tally.storage.resource_tables import ddl
from tally.storage.resources import Resource

VALUES_PER_QUERY = 500  # positions per IN list


@dataclass(frozen=True)
class Columns:
    """The output's columns an incremental run reads: match id, status, the positions."""

    match_id: Column
    status: Column
    left: Column
    right: Column


OutputRow = tuple[int | None, str, int | None, int | None]  # match id, status, positions


@dataclass(frozen=True)
class OutputRows:
    """The published output's rows showing any of the given left or right positions,
    and the largest row id (the patch's rows come after it)."""

    output: Resource
    columns: Columns
    lefts: Sequence[int]
    rights: Sequence[int]
    rows: list[OutputRow]
    max_row_id: int

    @classmethod
    def read(
        cls,
        conn: Connection,
        output: Resource,
        columns: Columns,
        lefts: Sequence[int],
        rights: Sequence[int],
    ) -> OutputRows:
        c = columns
        table = ddl.row_table(output.table_name, [c.match_id, c.status, c.left, c.right])
        row_id = table.c[ddl.ROW_ID]
        values = [table.c[x.physical] for x in (c.match_id, c.status, c.left, c.right)]
        found: dict[int, OutputRow] = {}
        for column, wanted in ((c.left, lefts), (c.right, rights)):
            for start in range(0, len(wanted), VALUES_PER_QUERY):
                chunk = list(wanted[start : start + VALUES_PER_QUERY])
                stmt = sa.select(row_id, *values).where(table.c[column.physical].in_(chunk))
                for row in conn.execute(stmt):
                    found[int(row[0])] = (row[1], row[2], row[3], row[4])
        top = conn.execute(sa.select(sa.func.max(row_id))).scalar_one()
        return cls(output, columns, lefts, rights, list(found.values()), int(top or 0))

    def delete(self, conn: Connection) -> None:
        """In the caller's (patch) transaction: delete these rows."""
        left, right = self.columns.left.physical, self.columns.right.physical
        table = sa.table(self.output.table_name, sa.column(left), sa.column(right))
        for name, wanted in ((left, self.lefts), (right, self.rights)):
            for start in range(0, len(wanted), VALUES_PER_QUERY):
                chunk = list(wanted[start : start + VALUES_PER_QUERY])
                conn.execute(sa.delete(table).where(table.c[name].in_(chunk)))
