"""Load one CSV file into a resource, all or nothing, in two streaming passes.

Pass 1 reads the whole file and settles every column's type (or checks the file
against the columns the resource already has); pass 2 converts and appends the rows.
Both run inside the caller's write transaction, with the resource row locked, so a
bad file leaves nothing behind and two loaders of one resource never interleave.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection

from tally.core.clock import utc_now
from tally.core.columns import Column, ColumnType, canonical_timestamp, scale_decimal
from tally.core.errors import LoadError, SchemaDifference, SchemaMismatchError
from tally.services.loader.inference import (
    DECIMAL,
    ColumnGuess,
    check_fits,
    decimal_scale,
    largest_magnitude,
    shape_of,
    values_fit,
)
from tally.services.loader.reader import FileFormat, detect_format, read_csv
from tally.storage import resource_tables, resources
from tally.storage.resources import Resource

# (phase, bytes of the file read in that phase): "checking" then "loading".
ProgressCallback = Callable[[str, int], None]


@dataclass(frozen=True)
class LoadResult:
    resource: Resource
    rows: int


def check_header(header: Sequence[str]) -> None:
    seen: set[str] = set()
    for position, name in enumerate(header, 1):
        if name == "":
            raise LoadError(f"column {position} has no name", line=1)
        if name in seen:
            raise LoadError("the column name appears twice", line=1, column=name)
        seen.add(name)


def _infer_columns(
    path: Path, file_format: FileFormat, on_progress: ProgressCallback | None
) -> tuple[Column, ...]:
    with read_csv(path, file_format) as (header, batches):
        check_header(header)
        guesses = [ColumnGuess() for _ in header]
        for batch in batches:
            if on_progress:
                on_progress("checking", batch.offset)
            for guess, values in zip(guesses, zip(*batch.rows, strict=True), strict=True):
                guess.observe(values)
    columns = []
    for position, (name, guess) in enumerate(zip(header, guesses, strict=True)):
        column_type, scale, timezone = guess.resolve()
        columns.append(Column(name, f"c{position}", column_type, scale, timezone))
    return tuple(columns)


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
) -> tuple[list[Column], dict[str, int]]:
    """Check every value against the known types; returns the file's column order and
    the decimal columns whose scale must grow (integer columns may become decimal)."""
    with read_csv(path, file_format) as (header, batches):
        ordered = _match_header(header, columns)
        scales = {
            c.physical: c.scale
            for c in ordered
            if c.type in (ColumnType.INTEGER, ColumnType.DECIMAL)
        }
        for batch in batches:
            if on_progress:
                on_progress("checking", batch.offset)
            for column, values in zip(ordered, zip(*batch.rows, strict=True), strict=True):
                shape = shape_of(column.type, column.timezone)
                if (
                    column.physical in scales
                    and not values_fit(shape, values)
                    and values_fit(DECIMAL, values)
                ):
                    shape = DECIMAL
                    scales[column.physical] = max(scales[column.physical], decimal_scale(values))
                elif column.type is ColumnType.DECIMAL:
                    scales[column.physical] = max(scales[column.physical], decimal_scale(values))
                check_fits(shape, values, lines=batch.lines, column=column.name)
                if column.physical in scales:
                    _check_range(column, values, scales[column.physical], batch.lines)
    return ordered, scales


def _check_range(column: Column, values: Sequence[str], scale: int, lines: Sequence[int]) -> None:
    if largest_magnitude(values).scaleb(scale) <= 2**63 - 1:
        return
    index = max(range(len(values)), key=lambda i: len(values[i]))
    raise LoadError(
        f"value {values[index]!r} has more digits than a stored number can hold",
        line=lines[index],
        column=column.name,
    )


def _widened(columns: Sequence[Column], scales: dict[str, int]) -> tuple[Column, ...]:
    out = []
    for c in columns:
        scale = scales.get(c.physical, c.scale)
        if c.type is ColumnType.INTEGER and scale > 0:
            out.append(Column(c.name, c.physical, ColumnType.DECIMAL, scale, False))
        elif c.type is ColumnType.DECIMAL and scale > c.scale:
            out.append(Column(c.name, c.physical, ColumnType.DECIMAL, scale, False))
        else:
            out.append(c)
    return tuple(out)


def converter(column: Column) -> Callable[[str], Any]:
    """Text from the file -> the stored value; "" is a missing value."""
    kind = column.type
    if kind is ColumnType.INTEGER:
        return lambda v: int(v) if v else None
    if kind is ColumnType.DECIMAL:
        scale = column.scale
        return lambda v: scale_decimal(v, scale) if v else None
    if kind is ColumnType.BOOLEAN:
        return lambda v: v.lower() == "true" if v else None
    if kind is ColumnType.TIMESTAMP:
        return _timestamp_converter
    return lambda v: v or None


def _timestamp_converter(value: str) -> str | None:
    if not value:
        return None
    # Fast path for the most common shape, 2024-01-31T12:00:00Z, already canonical.
    if len(value) == 20 and value[10] == "T" and value[19] == "Z":
        return value[:19]
    return canonical_timestamp(value)[0]


def _append_rows(
    conn: Connection,
    resource: Resource,
    path: Path,
    file_format: FileFormat,
    ordered: Sequence[Column],
    on_progress: ProgressCallback | None,
) -> int:
    converters = [converter(c) for c in ordered]
    writer = resource_tables.RowWriter(conn, resource.table_name, [c.physical for c in ordered])
    total = 0
    try:
        with read_csv(path, file_format) as (_header, batches):
            for batch in batches:
                columns = [
                    list(map(convert, values))
                    for convert, values in zip(
                        converters, zip(*batch.rows, strict=True), strict=True
                    )
                ]
                writer.write(list(zip(*columns, strict=True)))
                total += len(batch.rows)
                if on_progress:
                    on_progress("loading", batch.offset)
    except BaseException:
        writer.close(failed=True)
        raise
    writer.close()
    return total


def load_into(
    conn: Connection, resource_id: int, path: Path, on_progress: ProgressCallback | None = None
) -> LoadResult:
    """Append the file's rows to the resource. The caller commits or rolls back.

    A placeholder resource (no rows yet) takes its columns from this file; any other
    must receive the same columns, in any order, with values of the same types.
    """
    resource = resources.lock_resource(conn, resource_id)
    file_format = detect_format(path)
    if resource.is_placeholder or (resource.row_count == 0 and not resource.columns):
        columns = _infer_columns(path, file_format, on_progress)
        resource_tables.drop_table(conn, resource.table_name)
        resource_tables.create_table(conn, resource.table_name, columns)
        ordered: Sequence[Column] = columns
    else:
        ordered, scales = _check_against(path, file_format, resource.columns, on_progress)
        columns = _widened(resource.columns, scales)
        for old, new in zip(resource.columns, columns, strict=True):
            if new.scale > old.scale:
                resource_tables.rescale_column(
                    conn, resource.table_name, old.physical, 10 ** (new.scale - old.scale)
                )
        by_physical = {c.physical: c for c in columns}
        ordered = [by_physical[c.physical] for c in ordered]
    rows = _append_rows(conn, resource, path, file_format, ordered, on_progress)
    updated = resources.record_load(conn, resource, columns=columns, added_rows=rows, now=utc_now())
    return LoadResult(updated, rows)
