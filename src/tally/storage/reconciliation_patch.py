"""The rows of a reconciliation's published output that an incremental run replaces:
read in its snapshot (to adjust last_run's counts, and to keep the rows the run makes
again as they are), the others deleted in its patch transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

import sqlalchemy as sa
from sqlalchemy import Connection

from tally.core.columns import Column
from tally.storage.resource_tables import ddl
from tally.storage.resources import Resource

VALUES_PER_QUERY = 500  # positions per IN list


@dataclass(frozen=True)
class Columns:
    """The output's columns an incremental run reads: the match's values and the
    positions (the plan's values: an output row is these and its two input rows)."""

    match_id: Column
    status: Column
    pass_name: Column
    difference: Column
    reason: Column
    left: Column
    right: Column


OutputRow = tuple[int | None, str, int | None, int | None]  # match id, status, positions
# match id, status, pass, difference (an integer at its column's scale), reason, positions
PlanValues = tuple[int | None, str, str | None, int | None, str, int | None, int | None]


@dataclass(frozen=True)
class OutputRows:
    """The published output's rows showing any of the given left or right positions,
    and the largest row id (the patch's rows come after it)."""

    output: Resource
    values: dict[int, PlanValues]  # by row id
    max_row_id: int

    @property
    def rows(self) -> list[OutputRow]:
        """Each row's match id, status and positions (last_run's counts are adjusted by
        them)."""
        return [(v[0], v[1], v[5], v[6]) for v in self.values.values()]

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
        named = (c.match_id, c.status, c.pass_name, c.difference, c.reason, c.left, c.right)
        table = ddl.row_table(output.table_name, list(named))
        row_id = table.c[ddl.ROW_ID]
        selected = [table.c[x.physical] for x in named]
        found: dict[int, PlanValues] = {}
        for column, wanted in ((c.left, lefts), (c.right, rights)):
            for start in range(0, len(wanted), VALUES_PER_QUERY):
                chunk = list(wanted[start : start + VALUES_PER_QUERY])
                stmt = sa.select(row_id, *selected).where(table.c[column.physical].in_(chunk))
                for row in conn.execute(stmt):
                    difference = row[4]
                    if isinstance(difference, Decimal):  # PostgreSQL's NUMERIC
                        difference = int(difference.scaleb(c.difference.scale))
                    found[int(row[0])] = (row[1], row[2], row[3], difference, *row[5:])
        top = conn.execute(sa.select(sa.func.max(row_id))).scalar_one()
        return cls(output, found, int(top or 0))

    def delete(self, conn: Connection, row_ids: Sequence[int]) -> None:
        """In the caller's (patch) transaction: delete these of the rows."""
        table = sa.table(self.output.table_name, sa.column(ddl.ROW_ID))
        for start in range(0, len(row_ids), VALUES_PER_QUERY):
            chunk = list(row_ids[start : start + VALUES_PER_QUERY])
            conn.execute(sa.delete(table).where(table.c[ddl.ROW_ID].in_(chunk)))
