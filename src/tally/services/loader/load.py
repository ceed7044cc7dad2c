"""Load one CSV file into a resource, all or nothing, in two streaming passes.

Pass 1 reads the whole file and settles every column's type (or checks the file
against the columns the resource already has); pass 2 appends the rows, converted by
the database. Both run inside the caller's write transaction with the resource row
locked, so a bad file leaves nothing behind and two loads of one resource never
interleave. On PostgreSQL the raw bytes are COPYed while pass 1 runs, straight into the
table when its columns can be told from the resource or the file's first rows, so the
two passes overlap.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from itertools import chain
from pathlib import Path

from sqlalchemy import Connection

from tally.core.clock import utc_now
from tally.core.columns import INT64_MAX, Column, ColumnType
from tally.core.errors import LoadError, SchemaDifference, SchemaMismatchError
from tally.core.formats import FileLayout
from tally.core.limits import DEFAULT_FILE_LIMITS, FileLimits
from tally.processes.collector import settle_garbage_collector
from tally.services.loader.chunks import ChunkRecords, Counted, read_chunks
from tally.services.loader.inference import (
    DECIMAL,
    VALUE_SEPARATOR,
    BatchConfirmation,
    ColumnGuess,
    Magnitude,
    batch_confirmation,
    check_fits,
    decimal_scale,
    shape_of,
    timestamps_are_plain,
    values_fit,
)
from tally.services.loader.limits import check_width, table_refused
from tally.services.loader.pace import LoadPace
from tally.services.loader.reader import (
    FileFormat,
    FileHead,
    Records,
    detect_format,
    layout_chunks,
    read_csv,
    read_head,
    utf8_chunks,
)
from tally.storage import resources
from tally.storage.bulk_load import bulk_load_for
from tally.storage.bulk_load.interface import BulkLoad, Expected, FileReading, RawFile, ValueShape
from tally.storage.resource_tables import ddl
from tally.storage.resources import Resource

# Below this size a second process costs more (its start-up) than it saves.
PARALLEL_CHECK_MIN_BYTES = 32 * 1024 * 1024
# A placeholder's columns are guessed from this many first batches (of BATCH_ROWS rows),
# so that PostgreSQL's COPY can write the rows as they are while the whole file is read.
GUESS_BATCHES = 1

# (phase, bytes of the file read in that phase): "checking" then "loading".
ProgressCallback = Callable[[str, int], None]


@dataclass(frozen=True)
class LoadResult:
    resource: Resource
    rows: int
    warnings: tuple[str, ...] = ()  # shown in the file's status: columns kept as text


@dataclass
class FirstPass:
    """What pass 1 learnt: the columns in the file's order, and how to send them."""

    ordered: list[Column]
    rows: int = 0
    shapes: dict[str, ValueShape] = field(default_factory=dict)
    blank_lines: int = 0
    quotes: list[int] | None = None  # quote characters per column; None: the file has none
    widened_at: dict[str, int] = field(default_factory=dict)  # physical -> line
    warnings: list[str] = field(default_factory=list)

    def reading(self) -> FileReading:
        return FileReading(self.rows, self.blank_lines, self.quotes)


def _count_quotes(columns: Sequence[Sequence[str]], counts: list[int] | None) -> None:
    if counts is not None:
        for i, values in enumerate(columns):
            counts[i] += "".join(values).count('"')


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
    with read_chunks(path, file_format) as chunked:
        if chunked is not None:
            return _infer_from(path, file_format, chunked.header, chunked, on_progress)
    with read_csv(path, file_format) as (header, batches):
        return _infer_from(path, file_format, header, batches, on_progress)


def _infer_from(
    path: Path,
    file_format: FileFormat,
    header: list[str],
    batches: Records | ChunkRecords,
    on_progress: ProgressCallback | None,
) -> FirstPass:
    result = FirstPass([])
    check_header(header)
    guesses = [ColumnGuess() for _ in header]
    result.quotes = [0] * len(header) if file_format.has_quotes else None
    confirmation: BatchConfirmation | None = None
    lines: BatchConfirmation | None = None  # the file's own lines (chunks.py)
    if isinstance(batches, ChunkRecords):
        batches.confirms = lambda chunk: lines is not None and lines.matches(chunk)
    for batch in batches:
        if isinstance(batch, Counted):  # no value changes a guess, none holds a quote
            result.rows += batch.rows
        else:
            result.rows += len(batch.rows)
            joined = VALUE_SEPARATOR.join(chain.from_iterable(batch.rows))
            if confirmation is None or not confirmation.confirms(joined):
                columns = list(zip(*batch.rows, strict=True))
                for guess, values in zip(guesses, columns, strict=True):
                    guess.observe(values)
                confirmation = batch_confirmation(guesses)
                if isinstance(batches, ChunkRecords):
                    lines = batch_confirmation(guesses, file_format.delimiter)
                _count_quotes(columns, result.quotes)
            elif result.quotes is not None and '"' in joined:
                _count_quotes(list(zip(*batch.rows, strict=True)), result.quotes)
        if on_progress:
            on_progress("checking", batch.offset)
    result.blank_lines = batches.blank_lines
    _measure_again(path, file_format, guesses)
    for position, (name, guess) in enumerate(zip(header, guesses, strict=True)):
        column_type, scale, timezone = guess.resolve()
        column = Column(name, f"c{position}", column_type, scale, timezone)
        result.ordered.append(column)
        if (hint := guess.hint(name)) is not None:
            result.warnings.append(hint)
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


@dataclass
class _Number:
    """A numeric column of a later file: its scale so far and its values' magnitude."""

    scale: int
    magnitude: Magnitude = field(default_factory=Magnitude)

    def unsure(self) -> bool:
        """May a value leave int64 at the final scale? (Only a second look can tell.)"""
        return self.magnitude.exceeds(self.scale) or not self.magnitude.settled(self.scale)


def _check_against(
    path: Path,
    file_format: FileFormat,
    columns: Sequence[Column],
    on_progress: ProgressCallback | None,
) -> FirstPass:
    """Check every value against the known types. Numbers may widen: an integer column
    may become decimal, a decimal column may keep more digits. The values are read as
    columns (declared formats rewritten in them), never rows."""
    with read_csv(path, file_format, columns_only=True) as (header, batches):
        result = FirstPass(_match_header(header, columns))
        result.shapes = {c.physical: ValueShape(plain_timestamps=True) for c in columns}
        result.quotes = [0] * len(header) if file_format.has_quotes else None
        numbers = {
            c.physical: _Number(c.scale)
            for c in result.ordered
            if c.type in (ColumnType.INTEGER, ColumnType.DECIMAL)
        }
        for batch in batches:
            result.rows += len(batch.rows)
            values_by_column = batch.columns or list(zip(*batch.rows, strict=True))
            for column, values in zip(result.ordered, values_by_column, strict=True):
                _check_column(column, values, batch.lines, numbers, result)
            _count_quotes(values_by_column, result.quotes)
            if on_progress:
                on_progress("checking", batch.offset)
        result.blank_lines = batches.blank_lines
    _check_ranges(path, file_format, result.ordered, numbers)
    result.ordered = [
        _widened(c, numbers[c.physical].scale if c.physical in numbers else c.scale)
        for c in result.ordered
    ]
    return result


def _check_column(
    column: Column,
    values: Sequence[str],
    lines: Sequence[int],
    numbers: dict[str, _Number],
    result: FirstPass,
) -> None:
    shape = shape_of(column.type, column.timezone)
    number = numbers.get(column.physical)
    if number is not None:
        if not values_fit(shape, values) and values_fit(DECIMAL, values):
            shape = DECIMAL
        if shape == DECIMAL and (most := decimal_scale(values)) > number.scale:
            number.scale = most
            result.widened_at[column.physical] = next(
                line
                for v, line in zip(values, lines, strict=True)
                if len(v.partition(".")[2]) == most
            )
    check_fits(shape, values, lines=lines, column=column.name)
    if number is not None:
        number.magnitude.measure(values, number.scale)
    if column.type is ColumnType.TIMESTAMP and not timestamps_are_plain(values):
        # later files are converted the safe way for any non-plain timestamp
        result.shapes[column.physical] = ValueShape(plain_timestamps=False)


def _check_ranges(
    path: Path, file_format: FileFormat, ordered: Sequence[Column], numbers: dict[str, _Number]
) -> None:
    """Every number must fit int64 at its column's final scale: when the cheap checks
    cannot tell, read the file again to find the first that does not."""
    suspects = [
        (i, column, numbers[column.physical].scale)
        for i, column in enumerate(ordered)
        if column.physical in numbers and numbers[column.physical].unsure()
    ]
    if not suspects:
        return
    with read_csv(path, file_format) as (_header, batches):
        for batch in batches:
            for i, column, scale in suspects:
                _check_range(column, [row[i] for row in batch.rows], scale, batch.lines)


def _check_range(column: Column, values: Sequence[str], scale: int, lines: Sequence[int]) -> None:
    magnitude = Magnitude()
    magnitude.measure(values, scale)
    if not magnitude.exceeds(scale):
        return
    index = next(i for i, v in enumerate(values) if v and abs(Decimal(v)).scaleb(scale) > INT64_MAX)
    raise LoadError(
        f"value {values[index]!r} has more digits than a stored number can hold",
        line=lines[index],
        column=column.name,
    )


def _widened(column: Column, scale: int) -> Column:
    if column.type in (ColumnType.INTEGER, ColumnType.DECIMAL) and scale > column.scale:
        return Column(column.name, column.physical, ColumnType.DECIMAL, scale, False)
    return column


def row_batches(
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
    conn: Connection, resource: Resource, table: str, first: FirstPass, *, created: bool
) -> tuple[Column, ...]:
    """Create the table for a placeholder (unless the rows went into one `created` for
    them already), or widen stored numbers; the new columns."""
    if resource.is_placeholder:
        columns = tuple(first.ordered)
        if not created:
            ddl.drop_table(conn, resource.table_name)
            ddl.create_table(conn, resource.table_name, columns, file_ids=True)
        return columns
    widened = {c.physical: c for c in first.ordered}
    columns = tuple(widened[c.physical] for c in resource.columns)
    for old, new in zip(resource.columns, columns, strict=True):
        if new.scale > old.scale:
            check_rescale(conn, table, old, new, first.widened_at.get(new.physical))
            ddl.widen_column(conn, table, old, new)
    return columns


def check_rescale(conn: Connection, table: str, old: Column, new: Column, line: int | None) -> None:
    """The stored numbers must still fit int64 with the file's extra fractional digits."""
    low, high = ddl.stored_range(conn, table, old)
    factor = 10 ** (new.scale - old.scale)
    if max(abs(low or 0), abs(high or 0)) * factor > INT64_MAX:
        raise LoadError(
            f"the stored values cannot take {new.scale} fractional digits: they would "
            "have more digits than a stored number can hold",
            line=line,
            column=new.name,
        )


def first_pass(
    path: Path,
    file_format: FileFormat,
    known: tuple[Column, ...] | None,
    on_progress: ProgressCallback | None = None,
) -> FirstPass:
    """Infer the columns (a placeholder source) or check the file against `known`."""
    if known is None:
        return _infer(path, file_format, on_progress)
    return _check_against(path, file_format, known, on_progress)


def checked_while_staging(
    bulk: BulkLoad,
    path: Path,
    file_format: FileFormat,
    known: tuple[Column, ...] | None,
    on_progress: ProgressCallback | None,
    expected: Expected | None = None,
) -> FirstPass:
    """Run the first pass in another process while this one stages the rows (into the
    `expected` table where the backend can): the two halves of the work use both cores.
    A fresh interpreter ("spawn"), never a fork of a process that runs server and worker
    threads."""
    width = len(read_head(path, file_format, batches=0).header)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=1, mp_context=context, initializer=settle_garbage_collector
    ) as pool:
        checking = pool.submit(first_pass, path, file_format, known)
        try:
            bulk.stage_rows(row_batches(path, file_format, on_progress), width, expected)
        except LoadError:
            checking.cancel()
            raise  # the same reader would fail the same way in the first pass
        return checking.result()


def expected_columns(head: FileHead, resource: Resource) -> Expected | None:
    """The columns the file's rows will have, in the file's order, if they can be told
    before the whole file is read: the resource's own (matched by name), or for a
    placeholder those its first rows (`head`, GUESS_BATCHES batches) suggest (None when
    a column has no value there: any type may follow). Pass 1 decides afterwards; this
    only lets COPY start early."""
    header = head.header
    if not resource.is_placeholder:
        try:
            return Expected(tuple(_match_header(header, resource.columns)), create=False)
        except LoadError:
            return None  # pass 1 reports it
    guessed = guessed_columns(head)
    return None if guessed is None else Expected(guessed[0], create=True)


def guessed_columns(head: FileHead) -> tuple[tuple[Column, ...], dict[str, ValueShape]] | None:
    """A placeholder's columns as the file's first rows (`head`) suggest, in the file's
    order, and the shapes that convert their values: empty values allowed anywhere;
    decimals of one scale and plain timestamps as far as the head tells (the cheaper
    conversions: pass 1 says whether they hold for the whole file). None when a column
    has no value there (any type may follow) or the header is refused (pass 1 reports
    it)."""
    header = head.header
    try:
        check_header(header)
    except LoadError:
        return None
    guesses = [ColumnGuess(date_hints=()) for _ in header]  # hints are pass 1's to give
    for batch in head.batches:
        for guess, values in zip(guesses, zip(*batch.rows, strict=True), strict=True):
            guess.observe(values)
    if any(guess.shape is None for guess in guesses):
        return None
    columns = tuple(
        Column(name, f"c{position}", *guess.resolve())
        for position, (name, guess) in enumerate(zip(header, guesses, strict=True))
    )
    shapes = {
        c.physical: ValueShape(
            has_empty=True,
            uniform_scale=guess.uniform_scale,
            plain_timestamps=guess.plain_timestamps,
        )
        for c, guess in zip(columns, guesses, strict=True)
    }
    return columns, shapes


def _known_expected(header: Sequence[str], known: tuple[Column, ...] | None) -> Expected | None:
    """The resource's own columns in the file's order, if the header has them."""
    if known is None:
        return None
    try:
        return Expected(tuple(_match_header(header, known)), create=False)
    except LoadError:
        return None  # pass 1 reports it


def _stage_raw(
    bulk: BulkLoad, path: Path, file_format: FileFormat, resource: Resource, pace: LoadPace | None
) -> None:
    """Start moving the file's bytes before pass 1 reads it (PostgreSQL's COPY), into
    the columns the file's head suggests when it can tell them; at `pace`'s rate while
    it asks for one."""
    layout = file_format.layout
    batches = GUESS_BATCHES if resource.is_placeholder else 0
    head = read_head(path, file_format, batches=batches)

    def chunks() -> Iterator[bytes]:
        text = utf8_chunks(path, file_format) if layout.plain else layout_chunks(path, file_format)
        return text if pace is None else pace.paced(text)

    raw = RawFile(chunks, len(head.header), file_format.delimiter, layout.by_position(head.header))
    bulk.stage(raw, expected_columns(head, resource))


def load_into(
    conn: Connection,
    resource_id: int,
    path: Path,
    on_progress: ProgressCallback | None = None,
    *,
    encoding: str | None = None,
    limits: FileLimits = DEFAULT_FILE_LIMITS,
    pace: LoadPace | None = None,
    file_id: int | None = None,
    layout: FileLayout | None = None,
    table: str | None = None,
) -> LoadResult:
    """Append the file's rows to the resource. The caller commits or rolls back.
    `file_id`: the file record the rows come from, each row's `_file_id` (None: a
    `tally admin load`'s, which has none). `table`: where the rows go, when not the
    resource's own table (a snapshot's, swapped in afterwards: services/row_removal.py).

    A placeholder resource takes its columns from this file; any other must receive the
    same columns, in any order, with values of the same types. The file is read in the
    resource's encoding, or in `encoding` when its bytes are not in that (decision 0015),
    and in the resource's layout (lines skipped, declared formats), or `layout`.

    The file is opened for its format (one scan: encoding, delimiter), for its head
    when the backend moves rows before pass 1 (their width, and on PostgreSQL the
    columns COPY may write straight into), by the backend's raw stream (PostgreSQL's
    COPY, or SQLite's staging of a large file, each beside pass 1), by pass 1, and by
    the append when the backend needs the checked rows sent (SQLite, unless its staged
    rows serve; PostgreSQL only when COPY's reading was refused); rarely once more, for
    numbers the cheap checks cannot settle. The raw stream keeps to `pace` (a worker's
    loads, while the API is accepting notifications: decision 0022).
    """
    resource = resources.lock_resource(conn, resource_id)
    layout = resource.layout if layout is None else layout
    file_format = detect_format(path, encoding or resource.encoding, limits, layout)
    header = read_head(path, file_format, batches=0).header
    check_width(header, limits)
    known = None if resource.is_placeholder else resource.columns
    table = table or resource.table_name
    bulk = bulk_load_for(conn, table, file_id=file_id)
    with table_refused(len(header)):
        try:
            # the raw bytes serve when SQL can rewrite what the layout says (lines
            # skipped, dates at fixed places, numbers): else the rows as the loader reads
            raw = file_format.layout.sliced
            if bulk.takes_expected and raw:
                _stage_raw(bulk, path, file_format, resource, pace)
            rows_staged = bulk.stages_rows or (bulk.stages_read_rows and not raw)
            if rows_staged and path.stat().st_size >= PARALLEL_CHECK_MIN_BYTES:
                expected = _known_expected(header, known)
                first = checked_while_staging(bulk, path, file_format, known, on_progress, expected)
            else:
                first = first_pass(path, file_format, known, on_progress)
            appended = bulk.settle(first.reading(), first.ordered)  # before any other one
            columns = _prepare_table(conn, resource, table, first, created=appended)
            if not appended:
                by_physical = {c.physical: c for c in columns}
                ordered = [by_physical[c.physical] for c in first.ordered]
                bulk.append(ordered, first.shapes, row_batches(path, file_format, on_progress))
        finally:
            bulk.abort()
    updated = resources.record_load(
        conn, resource, columns=columns, added_rows=first.rows, now=utc_now()
    )
    return LoadResult(updated, first.rows, tuple(first.warnings))
