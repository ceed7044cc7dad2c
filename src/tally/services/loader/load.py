"""Load one CSV file into a resource, all or nothing, in two streaming passes.

Pass 1 reads the whole file and settles every column's type (or checks the file
against the columns the resource already has); pass 2 appends the rows, converted by
the database. Both run inside the caller's write transaction with the resource row
locked, so a bad file leaves nothing behind and two loads of one resource never
interleave. On PostgreSQL the raw bytes are COPYed to a staging table while pass 1
runs, so the two passes overlap.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Connection

from tally.core.clock import utc_now
from tally.core.columns import INT64_MAX, Column, ColumnType
from tally.core.errors import LoadError, SchemaDifference, SchemaMismatchError
from tally.services.loader.inference import (
    DECIMAL,
    ColumnGuess,
    check_fits,
    decimal_scale,
    largest_magnitude,
    shape_of,
    timestamps_are_plain,
    values_fit,
)
from tally.services.loader.reader import FileFormat, detect_format, raw_chunks, read_csv
from tally.storage import resource_tables, resources
from tally.storage.bulk_load import ValueShape, bulk_load_for
from tally.storage.resources import Resource

# (phase, bytes of the file read in that phase): "checking" then "loading".
ProgressCallback = Callable[[str, int], None]


@dataclass(frozen=True)
class LoadResult:
    resource: Resource
    rows: int


@dataclass
class FirstPass:
    """What pass 1 learnt: the columns in the file's order, and how to send them."""

    ordered: list[Column]
    rows: int = 0
    shapes: dict[str, ValueShape] = field(default_factory=dict)


def check_header(header: Sequence[str]) -> None:
    seen: set[str] = set()
    for position, name in enumerate(header, 1):
        if name == "":
            raise LoadError(f"column {position} has no name", line=1)
        if name in seen:
            raise LoadError("the column name appears twice", line=1, column=name)
        seen.add(name)


def _infer(
    path: Path,
    file_format: FileFormat,
    on_progress: ProgressCallback | None,
) -> FirstPass:
    rows = 0
    with read_csv(path, file_format) as (header, batches):
        check_header(header)
        guesses = [ColumnGuess() for _ in header]
        for batch in batches:
            rows += len(batch.rows)
            for guess, values in zip(guesses, zip(*batch.rows, strict=True), strict=True):
                guess.observe(values)
            if on_progress:
                on_progress("checking", batch.offset)
    _measure_again(path, file_format, guesses)
    result = FirstPass([], rows)
    for position, (name, guess) in enumerate(zip(header, guesses, strict=True)):
        column_type, scale, timezone = guess.resolve()
        column = Column(name, f"c{position}", column_type, scale, timezone)
        result.ordered.append(column)
        result.shapes[column.physical] = ValueShape(
            has_empty=guess.has_empty,
            uniform_scale=guess.uniform_scale,
            plain_timestamps=guess.plain_timestamps,
        )
    return result


def _measure_again(path: Path, file_format: FileFormat, guesses: Sequence[ColumnGuess]) -> None:
    """Rarely, a late value brings so many fractional digits that numbers skipped by the
    cheap range check may leave int64: measure those columns again, exactly."""
    again = [i for i, guess in enumerate(guesses) if guess.needs_measuring]
    if not again:
        return
    with read_csv(path, file_format) as (_header, batches):
        for batch in batches:
            for i in again:
                guesses[i].measure([row[i] for row in batch.rows])


def _match_header(header: Sequence[str], columns: Sequence[Column]) -> list[Column]:
    check_header(header)
    known = {c.name: c for c in columns}
    difference = SchemaDifference(
        missing=[c.name for c in columns if c.name not in set(header)],
        unexpected=[name for name in header if name not in known],
    )
    if difference.missing or difference.unexpected:
        raise SchemaMismatchError(difference)
    return [known[name] for name in header]


def _check_against(
    path: Path,
    file_format: FileFormat,
    columns: Sequence[Column],
    on_progress: ProgressCallback | None,
) -> FirstPass:
    """Check every value against the known types. Numbers may widen: an integer column
    may become decimal, a decimal column may keep more digits."""
    with read_csv(path, file_format) as (header, batches):
        result = FirstPass(_match_header(header, columns))
        result.shapes = {c.physical: ValueShape(plain_timestamps=True) for c in columns}
        scales = {
            c.physical: c.scale
            for c in result.ordered
            if c.type in (ColumnType.INTEGER, ColumnType.DECIMAL)
        }
        for batch in batches:
            result.rows += len(batch.rows)
            for column, values in zip(result.ordered, zip(*batch.rows, strict=True), strict=True):
                _check_column(column, values, batch.lines, scales, result)
            if on_progress:
                on_progress("checking", batch.offset)
    result.ordered = [_widened(c, scales.get(c.physical, c.scale)) for c in result.ordered]
    return result


def _check_column(
    column: Column,
    values: Sequence[str],
    lines: Sequence[int],
    scales: dict[str, int],
    result: FirstPass,
) -> None:
    shape = shape_of(column.type, column.timezone)
    if column.physical in scales:
        if not values_fit(shape, values) and values_fit(DECIMAL, values):
            shape = DECIMAL
        if shape == DECIMAL:
            scales[column.physical] = max(scales[column.physical], decimal_scale(values))
    check_fits(shape, values, lines=lines, column=column.name)
    if column.physical in scales:
        _check_range(column, values, scales[column.physical], lines)
    if column.type is ColumnType.TIMESTAMP and not timestamps_are_plain(values):
        # later files are converted the safe way for any non-plain timestamp
        result.shapes[column.physical] = ValueShape(plain_timestamps=False)


def _check_range(column: Column, values: Sequence[str], scale: int, lines: Sequence[int]) -> None:
    if largest_magnitude(values).scaleb(scale) <= INT64_MAX:
        return
    index = max(range(len(values)), key=lambda i: len(values[i]))
    raise LoadError(
        f"value {values[index]!r} has more digits than a stored number can hold",
        line=lines[index],
        column=column.name,
    )


def _widened(column: Column, scale: int) -> Column:
    if column.type in (ColumnType.INTEGER, ColumnType.DECIMAL) and scale > column.scale:
        return Column(column.name, column.physical, ColumnType.DECIMAL, scale, False)
    return column


def _row_batches(
    path: Path,
    file_format: FileFormat,
    on_progress: ProgressCallback | None,
) -> Callable[[], AbstractContextManager[Iterator[list[list[str]]]]]:
    @contextmanager
    def batches() -> Iterator[Iterator[list[list[str]]]]:
        with read_csv(path, file_format) as (_header, stream):

            def rows() -> Iterator[list[list[str]]]:
                for batch in stream:
                    yield batch.rows
                    if on_progress:
                        on_progress("loading", batch.offset)

            yield rows()

    return batches


def _prepare_table(
    conn: Connection,
    resource: Resource,
    first: FirstPass,
) -> tuple[Column, ...]:
    """Create the table for a placeholder, or widen stored numbers; the new columns."""
    if resource.is_placeholder:
        columns = tuple(first.ordered)
        resource_tables.drop_table(conn, resource.table_name)
        resource_tables.create_table(conn, resource.table_name, columns)
        return columns
    widened = {c.physical: c for c in first.ordered}
    columns = tuple(widened[c.physical] for c in resource.columns)
    for old, new in zip(resource.columns, columns, strict=True):
        if new.scale > old.scale:
            resource_tables.rescale_column(
                conn, resource.table_name, old.physical, 10 ** (new.scale - old.scale)
            )
    return columns


def load_into(
    conn: Connection, resource_id: int, path: Path, on_progress: ProgressCallback | None = None
) -> LoadResult:
    """Append the file's rows to the resource. The caller commits or rolls back.

    A placeholder resource takes its columns from this file; any other must receive the
    same columns, in any order, with values of the same types.
    """
    resource = resources.lock_resource(conn, resource_id)
    file_format = detect_format(path)
    with read_csv(path, file_format) as (header, _batches):
        width = len(header)
    bulk = bulk_load_for(conn, resource.table_name)
    bulk.stage(
        lambda: raw_chunks(path, file_format),
        width=width,
        delimiter=file_format.delimiter,
        encoding=file_format.encoding,
    )
    try:
        first = (
            _infer(path, file_format, on_progress)
            if resource.is_placeholder
            else _check_against(path, file_format, resource.columns, on_progress)
        )
        columns = _prepare_table(conn, resource, first)
        by_physical = {c.physical: c for c in columns}
        ordered = [by_physical[c.physical] for c in first.ordered]
        bulk.append(ordered, first.shapes, _row_batches(path, file_format, on_progress), first.rows)
    finally:
        bulk.abort()
    updated = resources.record_load(
        conn, resource, columns=columns, added_rows=first.rows, now=utc_now()
    )
    return LoadResult(updated, first.rows)
