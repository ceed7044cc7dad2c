"""What the loader hands a bulk load (the file's raw bytes, what its checks read, the
columns expected), and `BulkLoad`, the steps each backend's strategy implements."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

from sqlalchemy import Connection

from tally.core.columns import Column
from tally.core.formats import ColumnFormat


@dataclass(frozen=True)
class ValueShape:
    """What the loader's first pass saw of one column's values, so the cheapest exact
    conversion can be chosen: each avoided SQL function saves ~0.1 s per million rows."""

    has_empty: bool = True
    uniform_scale: bool = False  # every decimal has exactly `scale` fractional digits
    plain_timestamps: bool = False  # every timestamp is 'YYYY-MM-DD[T ]HH:MM:SS[Z]'


@dataclass(frozen=True)
class FileReading:
    """What the loader's checks read from the file, to compare with what COPY read.

    PostgreSQL's CSV parser differs from Python's on blank lines (a NULL row, or an
    error), on a lone backslash-dot line (the end of the data) and on a quote inside an
    unquoted field (it opens a quoted section; Python keeps it as text). Each changes
    the row count or the number of quote characters in the values.
    """

    rows: int
    blank_lines: int = 0
    quotes: Sequence[int] | None = None  # quote characters per column; None: none at all


@dataclass(frozen=True)
class RawFile:
    """The file's text as UTF-8 (header line included), how to split it, and how each
    column (in the file's order) writes its values: None, the clean form; else the
    format its source declares (issue 32), which the conversion rewrites in SQL."""

    chunks: Callable[[], Iterator[bytes]]
    width: int
    delimiter: str
    formats: tuple[ColumnFormat | None, ...] = ()


@dataclass(frozen=True)
class Expected:
    """The table the file's rows are expected to go to as they are: its columns in the
    file's order, and whether it is to be created for them (a placeholder's first file).
    The loader's checks decide afterwards whether the expectation held."""

    columns: tuple[Column, ...]
    create: bool


RowBatches = Callable[[], AbstractContextManager[Iterator[list[list[str]]]]]


class BulkLoad:
    """One file's rows on their way into a table, inside the caller's transaction.

    `stage` may start moving the raw bytes before the types are known (PostgreSQL
    COPYs them in a thread while the loader's first pass runs); `append` converts and
    appends, reading the batches again when the backend needs Python to send them.
    """

    # Whether `stage_rows` can copy the rows while another process runs the checks.
    stages_rows = False
    # Whether it can, for a file whose raw bytes are not its rows (a source's layout
    # skips lines or rewrites values: issue 32), where `stage` would send the bytes.
    stages_read_rows = False
    # Whether `stage` can put the rows straight into the table the loader expects.
    takes_expected = False

    def __init__(self, conn: Connection, table: str) -> None:
        self._conn = conn
        self._table = table

    def stage_rows(self, batches: RowBatches, width: int, expected: Expected | None = None) -> None:
        """Move the rows as the loader reads them (`batches`, `width` values each) while
        another process checks them; into the `expected` table's columns where the
        backend can."""
        raise NotImplementedError

    def stage(self, raw: RawFile, expected: Expected | None) -> None:
        return None

    def settle(self, reading: FileReading, columns: Sequence[Column]) -> bool:
        """Called once the checks have read the file and settled its `columns` (in the
        file's order), before any other statement of the transaction: keep or discard
        what `stage` moved. True when the rows are in the table already."""
        return False

    def append(
        self,
        ordered: Sequence[Column],
        shapes: Mapping[str, ValueShape],
        batches: RowBatches,
    ) -> None:
        """Convert and append the rows `stage` did not put in the table already."""
        raise NotImplementedError

    def abort(self) -> None:
        return None
