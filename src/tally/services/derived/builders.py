"""What a kind's builder gives the derived runs (services/derived/runs.py), which do
the rest the same way for every kind: an `Output` to stage and publish whole, or a
`Patch` of the published output; a `Companion` table kept beside it. A reconciliation
(reconciliation/runs.py) is a `Builder`: the runs write its output from the plan rows
it yields; a transformation (transformations/runs.py) is a `StagingBuilder`: it writes
its staged output itself."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from sqlalchemy import Connection, Engine

from tally.core.columns import Column
from tally.storage.derived.outputs import Guard
from tally.storage.derived.plans import Layout
from tally.storage.derived.records import DerivedRecord
from tally.storage.resource_tables.ddl import PartialIndex

if TYPE_CHECKING:
    from tally.services.derived.phases import Steps

# A summary's: the UTC date (ISO) the run read, for a query reading CURRENT_DATE; when
# the date changes, services/derived/runs.py queues a run of each output that has one.
READ_DATE = "current_date"


@dataclass(frozen=True)
class Output:
    """What a run's builder made of its inputs. `rows()` yields the plan's rows, in
    output order: (row id from 1, *values, *input row ids) (storage/derived/outputs.py);
    `digest` names the content (equal digests, equal outputs: nothing is published);
    `inputs` are the columns of each input as read, which must still hold when the
    output is published; `summary` is the kind's part of `last_run`."""

    layout: Layout
    rows: Callable[[], Iterable[Sequence[Any]]]
    row_count: int
    digest: str
    inputs: Mapping[int, tuple[Column, ...]]
    summary: dict[str, Any]
    # what this run read, kept for the next run to decide whether it may be incremental
    basis: dict[str, Any] | None = None
    companion: Companion | None = None
    # called last in the transaction that records the run (a reconciliation shows again
    # the analysts' actions taken while it ran: services/reconciliation/replay.py)
    after_publish: Callable[[Connection, dt.datetime], None] | None = None
    # the kind's own indexes, built with the one per column (a reconciliation's open rows)
    indexes: tuple[PartialIndex, ...] = ()


class Companion(Protocol):
    """A table the kind keeps beside its output (a reconciliation's key table, for
    incremental runs), needed by the next run only: built after the output is readable
    and indexed, swapped in by a short transaction of its own, the table it replaced
    discarded; the run's basis, recorded last, says it is there."""

    def stage(self, engine: Engine, guard: Guard) -> None: ...

    def swap(self, conn: Connection) -> None: ...

    def discard(self, engine: Engine, guard: Guard) -> None: ...


@dataclass(frozen=True)
class Patch:
    """An incremental run's result: the published output changed in place. `stage`,
    if any, writes what the change needs in the run's own tables (short transactions;
    a transformation's plan is written by its query already); `apply`, in the one
    publish transaction, replaces the output rows that changed and returns the output's
    new row count. `changes` False: nothing to write (no new rows)."""

    changes: bool
    apply: Callable[[Connection], int]
    digest: str
    inputs: Mapping[int, tuple[Column, ...]]
    summary: dict[str, Any]
    basis: dict[str, Any] | None = None
    stage: Callable[[Engine, Guard], None] | None = None
    after_publish: Callable[[Connection, dt.datetime], None] | None = None  # as Output's
    indexes: tuple[PartialIndex, ...] = ()  # as Output's (built if the output lacks them)


class Builder(Protocol):
    def build(self, record: DerivedRecord, steps: Steps) -> Output | Patch:
        """The output of `record` now (whole, or as a patch of the published one); each
        of its steps begun in `steps` (phases.py's names), never inside a transaction
        that renews the lease."""
        ...


@runtime_checkable
class StagingBuilder(Protocol):
    def stage(self, record: DerivedRecord, guard: Guard, steps: Steps) -> Output | Patch:
        """Write the output of `record` now to the staged table `r_{id}_next` itself (a
        transformation's INSERT ... SELECT; `guard` first in each transaction) and say
        what it holds (its `rows` unused); or, for an incremental run, write the new rows
        to the plan table `r_{id}_plan` and return the patch that adds them."""
        ...
