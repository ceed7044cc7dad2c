"""Column snapshots: a large resource's values held in memory as numpy arrays, one per
column and data version, from which the Data API counts any filter set and chooses any
page's rows exactly (decision 0014).

Why: an exact count of two conditions costs SQLite and PostgreSQL work in proportion to
the rows matched (a million row reads on SQLite, a parallel scan on PostgreSQL), and
users send every combination of filters, so neither an index per column nor the count
memo keeps a mixed load fast. A vectorised comparison over every row costs about a
millisecond a condition at 1M rows, whatever it matches. The database is then asked
only for the page's rows, by id, in the request's own snapshot.

Every column becomes an integer key array whose order is the database's order: numbers
and scaled decimals as themselves, booleans as 0/1, text-like values (text, dates,
canonical timestamps: byte order on both backends) as their positions among the
column's sorted distinct values. Each column also keeps its ascending order (missing
values first, ties by row id), the order `pages._order_by` asks the database for.

The distinct values are kept packed (`SortedTexts`: one UTF-8 buffer and the offsets
into it), not as Python strings: at ~80 bytes a string, the benchmark's two columns of
~a million distinct values took 130 of a 1M-row snapshot's 200 MiB.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine

from tally.core.columns import ROW_COLUMN, Column, ColumnType
from tally.core.filters import Condition, Operator, Ordering
from tally.processes.allocator import return_freed_memory
from tally.storage.engine import not_pooled, snapshot_connection
from tally.storage.resource_tables.column_values import read_column, read_row_ids
from tally.storage.resources import Resource, find_resource

log = logging.getLogger(__name__)

TEXT_LIKE = frozenset({ColumnType.TEXT, ColumnType.DATE, ColumnType.TIMESTAMP})

Mask = npt.NDArray[np.bool_]
Keys = npt.NDArray[np.integer[Any]]
Positions = npt.NDArray[np.integer[Any]]


@dataclass(frozen=True)
class SortedTexts:
    """Distinct texts in code point order, packed: their UTF-8 bytes one after another
    in `data`, and where each ends. UTF-8's byte order is code point order, so a text is
    found by bisecting the bytes. Lone surrogates (never in stored data; a filter's
    value might hold one) encode where their code points sort."""

    data: bytes
    ends: Positions  # the end of each text in `data`, ascending

    @classmethod
    def of(cls, texts: Sequence[str]) -> SortedTexts:
        """`texts`, already sorted and distinct."""
        sizes = np.fromiter((len(_utf8(t)) for t in texts), np.int64, len(texts))
        ends = np.cumsum(sizes)
        data = "".join(texts).encode("utf-8", "surrogatepass")
        return cls(data, ends.astype(np.int32) if len(data) < 2**31 else ends)

    def __len__(self) -> int:
        return len(self.ends)

    def __getitem__(self, position: int) -> bytes:
        start = int(self.ends[position - 1]) if position else 0
        return self.data[start : int(self.ends[position])]

    @property
    def nbytes(self) -> int:
        return len(self.data) + self.ends.nbytes

    def left(self, value: str) -> int:
        """Where `value` is, or would be inserted before any equal text."""
        return bisect.bisect_left(self, _utf8(value))

    def right(self, value: str) -> int:
        """Where `value` would be inserted after any equal text."""
        return bisect.bisect_right(self, _utf8(value))

    def at(self, position: int, value: str) -> bool:
        """Whether the text at `position` (maybe past the end) is `value`."""
        return position < len(self) and self[position] == _utf8(value)


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class SnapshotColumn:
    """One column's values as order-preserving integer keys."""

    keys: Keys
    missing: Mask | None  # where the value is missing; None when no row lacks one
    distinct: SortedTexts | None  # text-like: the sorted values the keys index
    order: Positions  # positions, ascending, missing first

    @property
    def nbytes(self) -> int:
        missing = 0 if self.missing is None else self.missing.nbytes
        text = 0 if self.distinct is None else self.distinct.nbytes
        return self.keys.nbytes + missing + self.order.nbytes + text

    def matches(self, condition: Condition) -> Mask | None:
        """The rows meeting `condition`; None for every row."""
        op = condition.op
        if op is Operator.NEVER:
            return np.zeros(len(self.keys), dtype=np.bool_)
        if op is Operator.IS_NULL:
            return self._missing_mask()
        if op is Operator.IS_NOT_NULL:
            return None if self.missing is None else ~self.missing
        if op in (Operator.IN, Operator.IN_OR_NULL):
            found = self._valid(self._among(condition.values))
            return found | self._missing_mask() if op is Operator.IN_OR_NULL else found
        if op is Operator.EQ:
            key = self._equal_key(condition.values[0])
            if key is None:
                return np.zeros(len(self.keys), dtype=np.bool_)
            return self._valid(self.keys == key)
        return self._valid(self._compare(op, condition.values[0]))

    def _compare(self, op: Operator, value: Any) -> Mask:
        if self.distinct is None:
            key = int(value)
            if op is Operator.GT:
                return self.keys > key
            if op is Operator.GTE:
                return self.keys >= key
            if op is Operator.LT:
                return self.keys < key
            return self.keys <= key
        # Text-like: `value` falls between two distinct values; compare with positions.
        if op in (Operator.GT, Operator.LTE):
            position = self.distinct.right(value)
            return self.keys >= position if op is Operator.GT else self.keys < position
        position = self.distinct.left(value)
        return self.keys >= position if op is Operator.GTE else self.keys < position

    def _among(self, values: Sequence[Any]) -> Mask:
        """Rows equal to one of `values`. One comparison per value: an in-list is a
        few values, and `np.isin` sorts the whole column each time (10 ms at 1M rows,
        against ~0.3 ms a comparison)."""
        found = np.zeros(len(self.keys), dtype=np.bool_)
        for key in {k for k in map(self._equal_key, values) if k is not None}:
            found |= self.keys == key
        return found

    def _equal_key(self, value: Any) -> int | None:
        """The key a row equal to `value` has; None when no row can equal it."""
        if self.distinct is None:
            return int(value)
        position = self.distinct.left(value)
        return position if self.distinct.at(position, value) else None

    def sorted_positions(self, positions: Positions) -> Positions:
        """`positions` (ascending) in this column's ascending order: missing values
        first, ties by row id (a stable sort keeps the positions' order)."""
        ranked = self.keys[positions]
        if self.missing is not None and self.distinct is None:
            # A missing number's key is a stand-in: missing values first, then keys
            # (np.lexsort is stable and sorts by its last key first).
            return positions[np.lexsort((ranked, ~self.missing[positions]))]
        return positions[np.argsort(ranked, kind="stable")]

    def _valid(self, mask: Mask) -> Mask:
        """`mask` without the rows whose value is missing (their keys are placeholders)."""
        return mask if self.missing is None else mask & ~self.missing

    def _missing_mask(self) -> Mask:
        if self.missing is None:
            return np.zeros(len(self.keys), dtype=np.bool_)
        return self.missing.copy()


@dataclass(frozen=True)
class ColumnSnapshot:
    """Every column of one data version of a resource, rows in row-id order."""

    data_version: int
    row_ids: npt.NDArray[np.int64]
    columns: dict[str, SnapshotColumn]  # by physical name; `_file_id` too for a source

    @property
    def nbytes(self) -> int:
        return self.row_ids.nbytes + sum(c.nbytes for c in self.columns.values())

    def _column(self, physical: str) -> SnapshotColumn:
        """A column by physical name; `_row_id` (a filter on `_row`) is the row ids
        themselves, ascending, which no ordering asks for (ordering by `_row` is
        insertion order): no copy and no order kept."""
        if physical == ROW_COLUMN.physical:
            return SnapshotColumn(self.row_ids, None, None, np.zeros(0, dtype=np.int32))
        return self.columns[physical]

    def matches(self, conditions: Sequence[Condition]) -> tuple[Mask, int]:
        """The rows meeting every condition, and how many they are."""
        found = np.ones(len(self.row_ids), dtype=np.bool_)
        for condition in conditions:
            mask = self._column(condition.column.physical).matches(condition)
            if mask is not None:
                found &= mask
        return found, int(np.count_nonzero(found))

    def page_row_ids(
        self, found: Mask, matching: int, ordering: Ordering, offset: int, limit: int
    ) -> list[int]:
        """The row ids at [offset, offset + limit) of the `matching` rows in `found`, in
        the order the database would give them (`pages._order_by`). Descending is
        ascending reversed: missing values last, ties by row id from the highest."""
        wanted = offset + limit
        column = None if ordering.column is None else self._column(ordering.column.physical)
        # Walking the column's order until the page's rows are found reads about
        # wanted * rows / matching entries; sorting the matches costs SORT_COST walked
        # entries each. The cheaper one is taken.
        if column is not None and wanted * len(self.row_ids) <= matching * matching * SORT_COST:
            return self._ids(_walk(column.order, found, ordering.descending, offset, wanted))
        positions: Positions = np.flatnonzero(found)
        if column is not None:
            positions = column.sorted_positions(positions)
        if ordering.descending:
            positions = positions[::-1]
        return self._ids(positions[offset:wanted])

    def _ids(self, positions: Positions) -> list[int]:
        return [int(i) for i in self.row_ids[positions]]


SORT_COST = 30  # sorting a match (~150 ns at 1M rows) costs walking ~30 entries (~5 ns each)
WALK_CHUNK = 65_536  # entries of an order tested at a time


def _walk(order: Positions, found: Mask, descending: bool, offset: int, wanted: int) -> Positions:
    """The matches at [offset, wanted) along `order` (backwards when `descending`),
    testing one chunk of it at a time and stopping once enough are found."""
    hits: list[Positions] = []
    got = 0
    total = len(order)
    start = 0
    while got < wanted and start < total:
        if descending:
            chunk = order[max(total - start - WALK_CHUNK, 0) : total - start][::-1]
        else:
            chunk = order[start : start + WALK_CHUNK]
        matched = chunk[found[chunk]]
        hits.append(matched)
        got += len(matched)
        start += WALK_CHUNK
    if not hits:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate(hits)[offset:wanted]


class OverBudgetError(Exception):
    """The snapshot outgrew its memory budget while it was being built."""


def build_snapshot(
    engine: Engine, resource: Resource, *, max_bytes: int | None = None
) -> ColumnSnapshot | None:
    """`resource`'s snapshot at its data version; None when that version is gone (the
    resource changed or was deleted since the request that asked for it).
    OverBudgetError as soon as the columns built pass `max_bytes`: a wide resource's
    whole snapshot (27 columns of 1.1M rows) would be built, over the budget, only to
    be dropped, its connection held all the while."""
    with not_pooled(snapshot_connection(engine)) as conn, conn.begin():
        current = find_resource(conn, resource.id)
        if current is None or current.data_version != resource.data_version:
            return None
        row_ids = np.asarray(read_row_ids(conn, current.table_name), dtype=np.int64)
        columns: dict[str, SnapshotColumn] = {}
        size = row_ids.nbytes
        system = [c for c in current.system_columns if c != ROW_COLUMN]  # `_row`: row_ids
        for c in (*current.columns, *system):
            column = _snapshot_column(c, read_column(conn, current.table_name, c))
            size += column.nbytes
            if max_bytes is not None and size > max_bytes:
                raise OverBudgetError
            columns[c.physical] = column
    return ColumnSnapshot(current.data_version, row_ids, columns)


def _snapshot_column(column: Column, values: list[Any]) -> SnapshotColumn:
    missing_list = [v is None for v in values]
    missing = np.asarray(missing_list, dtype=np.bool_) if any(missing_list) else None
    distinct: SortedTexts | None = None
    if column.type in TEXT_LIKE:
        present = values if missing is None else [v for v in values if v is not None]
        distinct, codes = _coded(present)
        coded = np.full(len(values), -1, dtype=np.int64)  # -1: missing, sorts first
        coded[slice(None) if missing is None else ~missing] = codes
        keys = _narrow(coded)
    else:
        # Integers, scaled decimals and booleans are their own keys; 0 stands in for a
        # missing value, which `missing` masks out of every comparison.
        keys = _narrow(
            np.fromiter((0 if v is None else int(v) for v in values), np.int64, len(values))
        )
    order = np.argsort(keys, kind="stable")  # stable: ties keep row-id order
    if missing is not None and distinct is None:
        order = np.concatenate((np.flatnonzero(missing), order[~missing[order]]))
    # (Text-like missing values are -1: already first.)
    positions = order.astype(np.int32) if len(values) < 2**31 else order
    return SnapshotColumn(keys, missing, distinct, positions)


def _coded(texts: list[str]) -> tuple[SortedTexts, npt.NDArray[np.int64]]:
    """The sorted distinct texts (code point order: UTF-8's byte order), and each text's
    position among them. Plain Python on purpose: numpy 2.4's variable-width text
    arrays crashed the process in `np.unique` in a background thread (a segmentation
    fault in CI) and fail `searchsorted` on texts over 15 bytes; ~3 s at 1M distinct
    values, 0.1-0.2 s for a column of few."""
    distinct = sorted(set(texts))
    position = {v: i for i, v in enumerate(distinct)}
    codes = np.fromiter((position[v] for v in texts), np.int64, len(texts))
    return SortedTexts.of(distinct), codes


def _narrow(keys: npt.NDArray[np.int64]) -> Keys:
    """The smallest integer type that holds the keys: comparisons over int8 run about
    twice as fast as over int64 (measured at 1M rows). A query's value outside that
    type's range still compares exactly (numpy compares Python integers by value)."""
    if not len(keys):
        return keys
    low, top = int(keys.min()), int(keys.max())
    for dtype in (np.int8, np.int16, np.int32):
        limits = np.iinfo(dtype)
        if limits.min <= low and top <= limits.max:
            return keys.astype(dtype)
    return keys


class ColumnSnapshots:
    """One process's snapshots: built in the background the first time a filtered
    request for a large resource's data version comes, kept while they fit in the
    memory budget (least recently used dropped first). Until one is ready, requests
    are answered by SQL; answers never depend on which path gave them."""

    def __init__(self, engine: Engine, *, min_rows: int, memory_bytes: int) -> None:
        self._engine = engine
        self._min_rows = min_rows
        self._memory_bytes = memory_bytes
        self._ready: OrderedDict[tuple[int, int], ColumnSnapshot] = OrderedDict()
        self._building: dict[int, threading.Thread] = {}
        self._too_big: set[tuple[int, int]] = set()
        self._lock = threading.Lock()
        # Builds take turns. Each holds a connection of the engine for its whole read,
        # and a query process's engine has two: two builds at once (two large resources
        # asked for in turn) left a request waiting 30 s for a connection, then 503.
        self._one_build = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self._memory_bytes > 0

    def find(self, resource: Resource) -> ColumnSnapshot | None:
        """The snapshot of `resource` at its data version, if ready; else starts its
        build (once) and returns None."""
        if not self.enabled or resource.row_count < self._min_rows:
            return None
        key = (resource.id, resource.data_version)
        with self._lock:
            if (snapshot := self._ready.get(key)) is not None:
                self._ready.move_to_end(key)
                return snapshot
            if key in self._too_big or resource.id in self._building:
                return None
            if any(k[0] == resource.id and k[1] > key[1] for k in self._ready):
                return None  # a request that read an older version: never asked again
            builder = threading.Thread(
                target=self._build, args=(resource,), name="tally-snapshot", daemon=True
            )
            self._building[resource.id] = builder
        # Said before the request that asked is answered, and its end said once it has
        # ended: an operator (or a benchmark waiting to time a steady state) sees what
        # the process's CPU went to, and when it is over.
        log.info(
            "column_snapshot_started",
            extra={"resource_id": resource.id, "data_version": resource.data_version},
        )
        builder.start()
        return None

    @property
    def building(self) -> bool:
        with self._lock:
            return bool(self._building)

    def wait(self, timeout: float | None = None) -> None:
        """Until the builds under way have ended (tests, benchmarks)."""
        with self._lock:
            builders = list(self._building.values())
        for builder in builders:
            builder.join(timeout)

    def _build(self, resource: Resource) -> None:
        snapshot = None
        outcome: str | None = None  # None: failed, said with its traceback
        started = time.perf_counter()
        try:
            try:
                with self._one_build:
                    snapshot = build_snapshot(self._engine, resource, max_bytes=self._memory_bytes)
                outcome = "column_snapshot_built" if snapshot else "column_snapshot_outdated"
            except OverBudgetError:
                outcome = "column_snapshot_over_budget"
                with self._lock:
                    self._too_big.add((resource.id, resource.data_version))
            except Exception:  # SQL answers meanwhile; the next request tries again
                log.exception("column_snapshot_failed", extra={"resource_id": resource.id})
            if snapshot is not None:
                with self._lock:
                    self._keep(resource.id, snapshot)
            # The build's strings, lists and dicts are gone: their pages go back.
            return_freed_memory()
            if outcome is not None:
                log.info(
                    outcome,
                    extra={
                        "resource_id": resource.id,
                        "data_version": resource.data_version,
                        "seconds": round(time.perf_counter() - started, 2),
                        "mib": round(snapshot.nbytes / 2**20, 1) if snapshot else 0,
                    },
                )
        finally:
            # Only now does the build stop counting as under way: whoever sees it ended
            # (`wait`, `find`) finds its snapshot kept and its end said. Said after it
            # stopped counting, a fast build's end line came after `wait` returned.
            with self._lock:
                self._building.pop(resource.id, None)

    def _keep(self, resource_id: int, snapshot: ColumnSnapshot) -> None:
        """Under the lock."""
        key = (resource_id, snapshot.data_version)
        for older in [k for k in self._ready if k[0] == resource_id]:
            del self._ready[older]  # an older data version is never asked for again
        self._ready[key] = snapshot
        while sum(s.nbytes for s in self._ready.values()) > self._memory_bytes:
            self._ready.popitem(last=False)
