"""Transformations as the API and the CLI use them: defined, listed, replaced and
deleted (issue #12); previewed in previews.py.

Each use case is one transaction. A transformation is a derived resource of kind
`transformation` (its definition, inputs and run queue) plus its output, an ordinary
resource of that kind named after it: created with the query's columns and no rows, so
the Data API reads it at once; runs (runs.py, in the workers) replace its table.
Another workspace's transformation does not exist (404); every change queues a run
due now.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine

from tally.core.clock import utc_now
from tally.core.columns import Column
from tally.core.errors import TransformationNotFoundError
from tally.services.derived import outputs as derived
from tally.services.transformations.definitions import (
    TransformationDefinition,
    checked_definition,
)
from tally.services.transformations.query import CheckedQuery
from tally.services.transformations.runs import RunLimits
from tally.services.transformations.shape import TransformationDefinitionBody, parse_definition
from tally.storage import accounts, resources
from tally.storage.derived import records as derived_resources
from tally.storage.derived.records import DerivedRecord
from tally.storage.engine import write_connection
from tally.storage.resources import Resource

KIND = "transformation"  # of the derived resource, and of its output resource


@dataclass(frozen=True)
class Transformation:
    id: int
    resource_id: int  # the output
    name: str
    definition: dict[str, Any]
    columns: tuple[Column, ...]
    state: str  # queued | running | idle | failed
    error: str | None
    last_run: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        """As the API and the CLI show it."""
        return {
            "id": self.id,
            "name": self.name,
            "resource_id": self.resource_id,
            "definition": self.definition,
            "columns": columns_json(self.columns),
            "state": self.state,
            "error": self.error,
            "last_run": self.last_run,
        }


def columns_json(columns: tuple[Column, ...]) -> list[dict[str, str]]:
    return [{"name": c.name, "type": str(c.type)} for c in columns]


class TransformationService:
    def __init__(self, engine: Engine, limits: RunLimits) -> None:
        self._engine = engine
        self._limits = limits

    def create(self, *, workspace_id: int, body: Any) -> Transformation:
        """The transformation, its empty output and its first run, due now."""
        shape = parse_definition(body)
        now = utc_now()
        with write_connection(self._engine) as conn, conn.begin():
            accounts.get_workspace(conn, workspace_id)
            definition, query, found = self._checked(conn, workspace_id, shape, None)
            columns = query.as_columns()
            output = derived.create_output(
                conn,
                workspace_id=workspace_id,
                kind=KIND,
                name=definition.name,
                columns=columns,
                now=now,
            )
            derived_id = derived_resources.insert_derived(
                conn,
                workspace_id=workspace_id,
                resource_id=output,
                kind=KIND,
                name=definition.name,
                definition=definition.to_json(),
                inputs=[r.id for r in found.values()],
                now=now,
            )
            return _of(conn, _owned(conn, workspace_id, derived_id))

    def list_transformations(
        self, *, workspace_id: int, after_id: int = 0, limit: int | None = None
    ) -> list[Transformation]:
        """Oldest first: those with ids above `after_id`, at most `limit` of them."""
        with self._engine.connect() as conn:
            accounts.get_workspace(conn, workspace_id)
            records = derived_resources.list_derived(
                conn, workspace_id, KIND, after_id=after_id, limit=limit
            )
            return [_of(conn, r) for r in records]

    def get(self, *, workspace_id: int, transformation_id: int) -> Transformation:
        with self._engine.connect() as conn:
            return _of(conn, _owned(conn, workspace_id, transformation_id))

    def replace(self, *, workspace_id: int, transformation_id: int, body: Any) -> Transformation:
        """A new definition, run at once (the output keeps its rows and columns until
        that run publishes)."""
        shape = parse_definition(body)
        now = utc_now()
        with write_connection(self._engine) as conn, conn.begin():
            record = _owned(conn, workspace_id, transformation_id, lock=True)
            definition, _, found = self._checked(conn, workspace_id, shape, record.resource_id)
            derived_resources.replace_definition(
                conn,
                record.id,
                name=definition.name,
                definition=definition.to_json(),
                inputs=[r.id for r in found.values()],
                now=now,
            )
            if definition.name != record.name:
                resources.rename_resource(conn, record.resource_id, definition.name, now)
            derived_resources.request_run(conn, record.id, now)
            return _of(conn, _owned(conn, workspace_id, record.id))

    def _checked(
        self,
        conn: Connection,
        workspace_id: int,
        shape: TransformationDefinitionBody,
        own_output: int | None,
    ) -> tuple[TransformationDefinition, CheckedQuery, dict[str, Resource]]:
        """The definition checked within the SQL limits and the time limit: one whose
        check alone outlasts the time limit is refused, as each of its runs would fail."""
        return checked_definition(
            conn,
            workspace_id,
            shape,
            own_output=own_output,
            limits=self._limits.sql,
            deadline=time.monotonic() + self._limits.timeout_seconds,
        )

    def delete(self, *, workspace_id: int, transformation_id: int) -> None:
        """The transformation, its output resource and table; refused (409) while
        another derived resource reads the output, naming each."""
        with write_connection(self._engine) as conn, conn.begin():
            record = _owned(conn, workspace_id, transformation_id, lock=True)
            derived.delete_with_output(conn, record)


def _owned(
    conn: Connection, workspace_id: int, transformation_id: int, *, lock: bool = False
) -> DerivedRecord:
    return derived.owned(
        conn,
        workspace_id=workspace_id,
        derived_id=transformation_id,
        kind=KIND,
        not_found=TransformationNotFoundError,
        lock=lock,
    )


def _of(conn: Connection, record: DerivedRecord) -> Transformation:
    output = resources.get_resource(conn, record.resource_id)
    return Transformation(
        record.id,
        record.resource_id,
        record.name,
        record.definition,
        output.columns,
        record.state,
        record.error,
        record.last_run,
    )
