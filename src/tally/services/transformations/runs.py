"""A transformation's run: its SQL, translated for the backend, run as one INSERT ...
SELECT into the staged output (services/derived_runs.py swaps it in), within the time
and row limits. Incremental when the query allows it (query.is_incremental) and every
input is a source, which only ever appends rows: the published rows are copied and the
output of the input rows added since the last run appended, which equals a full
recompute. What the last run read is kept in `last_run`, checked against the output's
digest, which is written in the same transaction as the output it describes."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Engine

from tally.core.columns import Column
from tally.services.derived_runs import Output
from tally.services.transformations.definitions import TransformationDefinition
from tally.services.transformations.dialect import Input
from tally.services.transformations.query import check_sql
from tally.storage import resources, transformation_sql
from tally.storage.derived_outputs import Guard, Layout, next_table
from tally.storage.derived_resources import DerivedRecord
from tally.storage.engine import backend_of
from tally.storage.resource_tables import ddl
from tally.storage.resources import Resource

SOURCE_KIND = "source"  # rows are only ever appended to a source's table


@dataclass(frozen=True)
class RunLimits:
    timeout_seconds: float
    max_rows: int


@dataclass(frozen=True)
class _Published:
    """What the published output holds, kept in `last_run`: its rows' content digest and
    the last row id read of each input (by its name in the SQL). `last_run` is written
    after the publish; it describes the published output only when its digest, written
    with the output, is `digest(key)` (a run whose worker died in between: full run)."""

    content: str
    read: dict[str, int]

    def digest(self, key: str) -> str:
        described = orjson.dumps([key, self.content, sorted(self.read.items())])
        return hashlib.sha256(described).hexdigest()

    def to_json(self) -> dict[str, Any]:
        return {"content_digest": self.content, "read_through": dict(self.read)}

    @classmethod
    def of(cls, record: DerivedRecord, key: str) -> _Published | None:
        last_run = record.last_run or {}
        content, read = last_run.get("content_digest"), last_run.get("read_through")
        if not isinstance(content, str) or not isinstance(read, dict):
            return None
        published = cls(content, {str(k): int(v) for k, v in read.items()})
        return published if published.digest(key) == record.output_digest else None


class TransformationBuilder:
    """The `StagingBuilder` of kind `transformation`."""

    def __init__(self, engine: Engine, limits: RunLimits) -> None:
        self._engine = engine
        self._limits = limits

    def stage(self, record: DerivedRecord, guard: Guard, timings: dict[str, float]) -> Output:
        definition = TransformationDefinition.from_json(record.definition)
        staged = next_table(record.resource_id)
        postgresql = backend_of(self._engine).is_postgresql
        clock = time.perf_counter()
        with transformation_sql.staging_connection(self._engine) as conn, conn.begin():
            guard(conn)
            found = {
                name: resources.get_resource(conn, resource_id)
                for name, resource_id in definition.inputs.items()
            }
            query = check_sql(definition.sql, {n: Input(r.id, r.columns) for n, r in found.items()})
            columns = query.as_columns()
            key = _key(definition, found)
            read_ids = transformation_sql.last_row_ids(
                conn, {r.id: r.table_name for r in found.values()}
            )
            read = {name: read_ids[r.id] for name, r in found.items()}
            previous = _Published.of(record, key)
            incremental = (
                previous is not None
                and query.is_incremental
                and all(r.kind == SOURCE_KIND for r in found.values())
            )
            if incremental and previous is not None and previous.read == read:
                rows = resources.get_resource(conn, record.resource_id).row_count
                return _output(columns, rows, previous.digest(key), previous, found, incremental)
            ddl.create_table(conn, staged, columns, generated_ids=False)
            with transformation_sql.time_limit(conn, self._limits.timeout_seconds):
                kept = 0
                if incremental and previous is not None:
                    output = resources.get_resource(conn, record.resource_id)
                    kept = transformation_sql.copy_rows(conn, output.table_name, staged, columns)
                    after = {found[name].id: row_id for name, row_id in previous.read.items()}
                    sql = query.backend_sql(postgresql=postgresql, after_row_ids=after)
                else:
                    sql = query.backend_sql(postgresql=postgresql)
                added = transformation_sql.insert_rows(
                    conn,
                    staged,
                    columns,
                    sql,
                    after_row_id=kept,
                    max_rows=self._limits.max_rows,
                )
            content = transformation_sql.content_digest(conn, staged)
        timings["query"] = time.perf_counter() - clock
        now = _Published(content, read)
        if previous is not None and previous.content == content:
            now = previous  # the same rows: nothing to publish, the digest stays
        return _output(columns, kept + added, now.digest(key), now, found, incremental)


def _output(
    columns: tuple[Column, ...],
    rows: int,
    digest: str,
    published: _Published,
    found: dict[str, Resource],
    incremental: bool,
) -> Output:
    inputs = {n: {"resource_id": r.id, "data_version": r.data_version} for n, r in found.items()}
    return Output(
        layout=Layout(columns, (), (), ()),
        rows=lambda: (),
        row_count=rows,
        digest=digest,
        inputs={r.id: r.columns for r in found.values()},
        summary={
            "rows": rows,
            "incremental": incremental,
            "inputs": inputs,
            **published.to_json(),
        },
    )


def _key(definition: TransformationDefinition, found: dict[str, Resource]) -> str:
    """What an output's rows depend on besides the inputs' rows: the SQL and the inputs'
    columns (a widened decimal column changes the stored values)."""
    described: list[Any] = [definition.sql]
    for name, resource in sorted(found.items()):
        described.append([name, resource.id, [c.to_json() for c in resource.columns]])
    return hashlib.sha256(orjson.dumps(described)).hexdigest()[:32]
