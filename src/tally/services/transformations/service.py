"""Transformations as the API and the CLI use them: defined, listed, replaced and
deleted (issue #12: the lifecycle every derived resource shares,
services/derived/lifecycle.py, given a transformation's checks and its query's
columns); previewed in previews.py.

The output is an ordinary resource of kind `transformation` named after it, created
with the query's columns and no rows. Another workspace's transformation does not exist
(404); every change queues a run due now.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine

from tally.core.columns import Column
from tally.core.errors import TransformationNotFoundError
from tally.services.derived.lifecycle import Checked, DefinitionLifecycle, Derived
from tally.services.transformations.bodies import TransformationDefinitionBody, parse_definition
from tally.services.transformations.definitions import checked_definition
from tally.services.transformations.runs import RunLimits
from tally.storage import resources
from tally.storage.derived.records import DerivedRecord

KIND = "transformation"  # of the derived resource, and of its output resource


@dataclass(frozen=True)
class Transformation(Derived):
    """A transformation as the API and the CLI show it, with its output's columns (the
    last published run's)."""

    columns: tuple[Column, ...] = ()

    def own_json(self) -> dict[str, Any]:
        return {"columns": columns_json(self.columns)}


def columns_json(columns: tuple[Column, ...]) -> list[dict[str, str]]:
    return [{"name": c.name, "type": str(c.type)} for c in columns]


class TransformationService(DefinitionLifecycle[TransformationDefinitionBody, Transformation]):
    """The definition's lifecycle (derived/lifecycle.py: create, list_defined, get,
    replace, delete) with a transformation's checks and columns: its query's."""

    kind = KIND
    not_found = TransformationNotFoundError

    def __init__(self, engine: Engine, limits: RunLimits) -> None:
        super().__init__(engine)
        self._limits = limits

    def parse(self, body: Any) -> TransformationDefinitionBody:
        return parse_definition(body)

    def check(
        self,
        conn: Connection,
        workspace_id: int,
        body: TransformationDefinitionBody,
        *,
        own_output: int | None,
    ) -> Checked:
        """The definition checked within the SQL limits and the time limit: one whose
        check alone outlasts the time limit is refused, as each of its runs would fail."""
        definition, query, found = checked_definition(
            conn,
            workspace_id,
            body,
            own_output=own_output,
            limits=self._limits.sql,
            deadline=time.monotonic() + self._limits.timeout_seconds,
        )
        inputs = [r.id for r in found.values()]
        return Checked(definition.name, definition.to_json(), inputs, query.as_columns())

    def shown(self, conn: Connection, record: DerivedRecord) -> Transformation:
        output = resources.get_resource(conn, record.resource_id)
        return Transformation.of(record, columns=output.columns)
