"""A transformation's run: its SQL, translated for the backend, run as one INSERT ...
SELECT into the staged output (services/derived/publishing.py swaps it in), within the time
and row limits. Incremental when the query allows it (query.is_incremental) and every
input is a source, which only ever appends rows: the output of the input rows added
since the last run is staged in the plan table, then appended to the published output
in place (a `Patch`; its indexes take the new rows as any insert does), which equals a
full recompute. What the last run read is kept in `last_run`, checked against the
output's digest, which is written in the same transaction as the output it describes.
A recompute whose rows equal the published output's (same_rows) publishes nothing.

A query reading CURRENT_DATE reads the run's UTC date, taken once as it starts; the
date is part of what the rows depend on (`_key`), so the first run of a new date
recomputes (never appends to rows of another date), and `last_run.current_date` names
it: services/derived/runs.py queues a run of each such output when the date changes."""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Connection, Engine

from tally.core.clock import utc_now
from tally.core.columns import Column
from tally.core.sql_limits import DEFAULT_SQL_LIMITS, SqlLimits
from tally.services.derived.builders import READ_DATE, Output, Patch
from tally.services.derived.phases import Steps
from tally.services.transformations.definitions import TransformationDefinition
from tally.services.transformations.dialect import Input
from tally.services.transformations.query import CheckedQuery, check_sql
from tally.storage import resources, staging, transformation_sql
from tally.storage.derived.outputs import Guard, next_table, plan_table
from tally.storage.derived.plans import Layout
from tally.storage.derived.records import DerivedRecord
from tally.storage.engine import backend_of, write_connection
from tally.storage.resource_tables import ddl
from tally.storage.resources import Resource, table_name_for
from tally.storage.staging import STAGE_ALIAS

SOURCE_KIND = "source"  # rows are appended to a source's table, or removed (`_key`)


@dataclass(frozen=True)
class RunLimits:
    timeout_seconds: float  # the check of the SQL and its query, together
    max_rows: int
    sql: SqlLimits = DEFAULT_SQL_LIMITS


@dataclass(frozen=True)
class _Published:
    """What the published output holds, kept in `last_run`: a token naming its rows (the
    same while they stay the same, a new one when they change) and the last row id read
    of each input (by its name in the SQL). `last_run` is written after the publish; it
    describes the published output only when its digest, written with the output, is
    `digest(key)` (a run whose worker died in between: full run)."""

    rows: str
    read: dict[str, int]

    def digest(self, key: str) -> str:
        described = orjson.dumps([key, self.rows, sorted(self.read.items())])
        return hashlib.sha256(described).hexdigest()

    def changed(self, read: dict[str, int]) -> _Published:
        """The output after its rows changed, having read through `read`."""
        token = orjson.dumps([self.rows, sorted(read.items())])
        return _Published(hashlib.sha256(token).hexdigest(), read)

    def to_json(self) -> dict[str, Any]:
        return {"rows_token": self.rows, "read_through": dict(self.read)}

    @classmethod
    def of(cls, record: DerivedRecord, key: str) -> _Published | None:
        last_run = record.last_run or {}
        rows, read = last_run.get("rows_token"), last_run.get("read_through")
        if not isinstance(rows, str) or not isinstance(read, dict):
            return None
        published = cls(rows, {str(k): int(v) for k, v in read.items()})
        return published if published.digest(key) == record.output_digest else None


@dataclass(frozen=True)
class _Run:
    """What a run read: the output's columns, what the rows depend on besides the
    inputs' rows (`key`), the last row id read of each input, the inputs; when its time
    limit, which its check started, ends (`time.monotonic()`)."""

    columns: tuple[Column, ...]
    key: str
    read: dict[str, int]
    found: dict[str, Resource]
    deadline: float
    today: dt.date | None  # CURRENT_DATE, for a query that reads it

    @property
    def inputs(self) -> dict[int, tuple[Column, ...]]:
        return {r.id: r.columns for r in self.found.values()}

    def summary(self, rows: int, published: _Published, incremental: bool) -> dict[str, Any]:
        inputs = {
            n: {"resource_id": r.id, "data_version": r.data_version} for n, r in self.found.items()
        }
        dated = {} if self.today is None else {READ_DATE: self.today.isoformat()}
        return {
            "rows": rows,
            "incremental": incremental,
            "inputs": inputs,
            **dated,
            **published.to_json(),
        }

    def output(self, rows: int, published: _Published, incremental: bool) -> Output:
        return Output(
            layout=Layout(self.columns, (), (), ()),
            rows=lambda: (),
            row_count=rows,
            digest=published.digest(self.key),
            inputs=self.inputs,
            summary=self.summary(rows, published, incremental),
        )


class TransformationBuilder:
    """The `StagingBuilder` of kind `transformation`. On SQLite the query writes its rows
    into a staging file of its own in `staging_dir`, so the database's one write lock is
    not held while it runs (a query may run up to its time limit); the rows are then
    moved in short transactions, as a load's are (decision 0013). PostgreSQL stages in
    place: its row locks stop no other writer."""

    def __init__(self, engine: Engine, limits: RunLimits, staging_dir: Path) -> None:
        self._engine = engine
        self._limits = limits
        self._staging_dir = staging_dir if backend_of(engine).has_one_writer else None

    def stage(self, record: DerivedRecord, guard: Guard, steps: Steps) -> Output | Patch:
        definition = TransformationDefinition.from_json(record.definition)
        steps.begin("query")  # before the transaction that renews the lease
        if self._staging_dir is None:
            with transformation_sql.staging_connection(self._engine) as conn, conn.begin():
                guard(conn)
                built = self._query(conn, record, definition, schema="")
        else:
            built = self._query_aside(record, definition, guard, self._staging_dir)
        return built

    def _query_aside(
        self,
        record: DerivedRecord,
        definition: TransformationDefinition,
        guard: Guard,
        folder: Path,
    ) -> Output | Patch:
        """SQLite: the query reads one snapshot of the main database and writes into a
        scratch file (no write lock of the main database is taken), then what is to be
        published moves into the main database: a recompute's rows in chunks (none when
        they equal the published ones), a patch's few rows in one transaction."""
        resource_id = record.resource_id
        path = staging.derived_scratch_path(folder, resource_id)
        try:
            with (
                self._engine.connect() as conn,
                staging.attached(conn, path, scratch=True),
                conn.begin(),  # reads the main database, writes only the scratch file
            ):
                built = self._query(conn, record, definition, schema=f"{STAGE_ALIAS}.")
            with write_connection(self._engine) as conn, staging.attached(conn, path):
                if isinstance(built, Patch):
                    if built.changes:
                        with conn.begin():
                            guard(conn)
                            plan = plan_table(resource_id)
                            transformation_sql.copy_table(conn, f"{STAGE_ALIAS}.{plan}", plan)
                elif built.digest != record.output_digest:  # else nothing is published
                    table = next_table(resource_id)
                    with conn.begin():
                        guard(conn)
                        ddl.create_table(conn, table, built.layout.columns, generated_ids=False)
                    staging.fill_in_chunks(
                        conn, table, built.layout.columns, staged=table, guard=guard
                    )
        finally:
            path.unlink(missing_ok=True)
        return built

    def _query(
        self,
        conn: Connection,
        record: DerivedRecord,
        definition: TransformationDefinition,
        *,
        schema: str,
    ) -> Output | Patch:
        """The run's query in one snapshot of its inputs, its rows written into the
        staged output or the patch's plan in `schema` ("" the main database)."""
        found = {
            name: resources.get_resource(conn, resource_id)
            for name, resource_id in definition.inputs.items()
        }
        deadline = time.monotonic() + self._limits.timeout_seconds
        today = utc_now().date()  # one date for the whole run
        query = check_sql(
            definition.sql,
            {n: Input(r.id, r.columns) for n, r in found.items()},
            self._limits.sql,
            deadline=deadline,
        )
        read_ids = transformation_sql.last_row_ids(
            conn, {r.id: r.table_name for r in found.values()}
        )
        read = {name: read_ids[r.id] for name, r in found.items()}
        dated = today if query.reads_current_date else None
        run = _Run(query.as_columns(), _key(definition, found, dated), read, found, deadline, dated)
        previous = _Published.of(record, run.key)
        if (
            previous is not None
            and query.is_incremental
            and all(r.kind == SOURCE_KIND for r in found.values())
        ):
            return self._append(conn, record, query, run, previous, schema)
        return self._recompute(conn, record, query, run, previous, schema)

    def _recompute(
        self,
        conn: Connection,
        record: DerivedRecord,
        query: CheckedQuery,
        run: _Run,
        previous: _Published | None,
        schema: str,
    ) -> Output:
        """The whole output, staged in `r_<id>_next` (in `schema`) for the publish to swap
        in."""
        staged = schema + next_table(record.resource_id)
        ddl.create_table(conn, staged, run.columns, primary_key=False, generated_ids=False)
        with transformation_sql.time_limit(
            conn, self._limits.timeout_seconds, deadline=run.deadline
        ):
            rows = transformation_sql.insert_rows(
                conn,
                staged,
                run.columns,
                query,
                kept=0,
                max_rows=self._limits.max_rows,
                today=run.today,
            )
        if previous is None:  # no output of this definition: publish whatever the rows
            now = _Published("", {}).changed(run.read)
        elif rows == _row_count(conn, record) and transformation_sql.same_rows(
            conn, staged, table_name_for(record.resource_id), run.columns
        ):
            now = previous  # the same rows: nothing to publish, the digest stays
        else:
            now = previous.changed(run.read)
        return run.output(rows, now, incremental=False)

    def _append(
        self,
        conn: Connection,
        record: DerivedRecord,
        query: CheckedQuery,
        run: _Run,
        previous: _Published,
        schema: str,
    ) -> Output | Patch:
        """The output of the input rows added since the last run, staged in the plan
        table `r_<id>_plan` (in `schema`; the patch reads it from the main database),
        and the patch that appends it to the published output."""
        kept = _row_count(conn, record)
        if previous.read == run.read:  # no new input rows: nothing to run, nothing changes
            return run.output(kept, previous, incremental=True)
        plan = schema + plan_table(record.resource_id)
        ddl.create_table(conn, plan, run.columns, primary_key=False, generated_ids=False)
        after = {run.found[name].id: row_id for name, row_id in previous.read.items()}
        with transformation_sql.time_limit(
            conn, self._limits.timeout_seconds, deadline=run.deadline
        ):
            added = transformation_sql.insert_rows(
                conn,
                plan,
                run.columns,
                query,
                after_row_ids=after,
                kept=kept,
                max_rows=self._limits.max_rows,
                today=run.today,
            )
        if added:
            now = previous.changed(run.read)
        else:  # the new input rows were all filtered out: the same rows
            ddl.drop_table(conn, plan)
            now = _Published(previous.rows, run.read)
        output, columns = record.resource_id, run.columns

        def apply(conn: Connection) -> int:
            """In the publish transaction: the plan's rows after the output's last."""
            table = table_name_for(output)
            last = transformation_sql.last_row_ids(conn, {output: table})[output]
            return last + transformation_sql.append_rows(
                conn, plan_table(output), table, columns, after_row_id=last
            )

        return Patch(
            changes=added > 0,
            apply=apply,
            digest=now.digest(run.key),
            inputs=run.inputs,
            summary=run.summary(kept + added, now, incremental=True),
        )


def _row_count(conn: Connection, record: DerivedRecord) -> int:
    """How many rows the published output holds."""
    return resources.get_resource(conn, record.resource_id).row_count


def _key(
    definition: TransformationDefinition, found: dict[str, Resource], today: dt.date | None
) -> str:
    """What an output's rows depend on besides the inputs' rows: the SQL, the inputs'
    columns (a widened decimal column changes the stored values), the date, if the
    query reads CURRENT_DATE, and when rows were last removed from an input (a snapshot
    replaced, a file taken back): rows read before then may be gone, so the appended
    output is no base (named only once it happened, so older keys stay as they were)."""
    described: list[Any] = [definition.sql]
    if today is not None:
        described.append(today.isoformat())
    for name, resource in sorted(found.items()):
        read = [name, resource.id, [c.to_json() for c in resource.columns]]
        if resource.removed_version:
            read.append(resource.removed_version)
        described.append(read)
    return hashlib.sha256(orjson.dumps(described)).hexdigest()[:32]
