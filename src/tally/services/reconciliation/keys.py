"""Each input row's normalised key under each key signature of a definition: what an
incremental run needs to find the rows a late file's rows can affect (decision 0016).

A signature is one pass's keys (pairs of columns and their normalisers); passes with the
same keys share one. Under a signature a left row and a right row, or two rows of one
side, are in one key group when their keys are equal and not empty: the engine decides
every row by its groups alone (matching.py), so the rows a new row can affect are those
it reaches through groups of any signature (incremental.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from sqlalchemy import Connection, Engine

from tally.core.reconciliation import ManualWork, Normalizer, ReconciliationDefinition, SideName
from tally.services.reconciliation.matching import SideTable, key_columns
from tally.services.reconciliation.normalizers import normalized_column
from tally.storage import reconciliation_keys
from tally.storage.derived.outputs import Guard
from tally.storage.reconciliation_keys import KeyRow

Signature = tuple[tuple[str, str, tuple[Normalizer, ...]], ...]  # (left, right, normalisers)
SEPARATOR = "\x1f"  # between the parts of a key of several columns
TAG = "\x1e"  # before a key of a less normalised signature of a chain (PostgreSQL text has no NUL)


def signatures(definition: ReconciliationDefinition) -> list[Signature]:
    """The distinct keys of the keyed passes, in order of first use."""
    found: dict[Signature, None] = {}
    for match_pass in definition.passes:
        if match_pass.keys:
            found.setdefault(tuple((k.left, k.right, k.normalize) for k in match_pass.keys))
    return list(found)


def chains(definition: ReconciliationDefinition) -> list[list[Signature]]:
    """The signatures in chains, one key column each: signatures on the same columns
    whose normalisers extend one another (`reference` raw, and trimmed and casefolded),
    the most normalised first. Rows equal under any signature of a chain are equal
    under its key (`side_keys`), so one column and one index serve the chain."""
    found: list[list[Signature]] = []
    for signature in sorted(signatures(definition), key=_steps, reverse=True):
        for chain in found:
            if _extends(chain[-1], signature):
                chain.append(signature)
                break
        else:
            found.append([signature])
    return found


def _steps(signature: Signature) -> int:
    return sum(len(normalize) for _, _, normalize in signature)


def _extends(coarser: Signature, finer: Signature) -> bool:
    """Each pair of `finer` is that of `coarser` with a first part of its normalisers."""
    return len(coarser) == len(finer) and all(
        (a[0], a[1]) == (b[0], b[1]) and a[2][: len(b[2])] == b[2]
        for a, b in zip(coarser, finer, strict=True)
    )


def side_keys(
    definition: ReconciliationDefinition, which: SideName, rows: SideTable
) -> list[list[str | None]]:
    """Per chain, each row's key on this side (None: empty): its key under the chain's
    most normalised signature, or where that is empty, under the next one, tagged with
    its level. Two rows equal under one signature are so under the more normalised ones
    (their keys are functions of it): both empty there, or both equal, so their first
    non-empty level and its key are the same. Keys that collide (several columns joined,
    a tag) only put more rows in a group: an incremental run re-examines a few more
    rows, never gives another result."""
    columns = key_columns(definition, which)
    out: list[list[str | None]] = []
    for chain in chains(definition):
        merged = _signature_keys(chain[0], columns, which, rows)
        for level, signature in enumerate(chain[1:], 1):
            finer = _signature_keys(signature, columns, which, rows)
            tag = TAG * level
            merged = [
                key if key is not None or other is None else tag + other
                for key, other in zip(merged, finer, strict=True)
            ]
        out.append(merged)
    return out


def _signature_keys(
    signature: Signature, columns: tuple[str, ...], which: SideName, rows: SideTable
) -> list[str | None]:
    parts = []
    for left, right, normalize in signature:
        index = columns.index(left if which is SideName.LEFT else right)
        raw = list(rows.keys[index])
        parts.append(normalized_column(raw, normalize))
    if len(parts) == 1:
        return parts[0]
    return [None if None in p else SEPARATOR.join(p) for p in zip(*parts, strict=True)]


def key_rows(
    definition: ReconciliationDefinition,
    which: SideName,
    rows: SideTable,
    row_ids: Sequence[int],
) -> Iterator[KeyRow]:
    """The key table's rows of these input rows: (pos, row id, keys...), pos being a
    left row's position or minus a right row's."""
    sign = 1 if which is SideName.LEFT else -1
    positions = (sign * position for position in rows.positions)
    columns = side_keys(definition, which, rows)
    return zip(positions, row_ids, *columns, strict=True)


def component(
    conn: Connection,
    resource_id: int,
    definition: ReconciliationDefinition,
    manual: ManualWork,
    new: Sequence[tuple[SideName, SideTable]],
    limit: float,
) -> list[KeyRow] | str:
    """The key table's rows of the earlier rows the new rows reach through key groups
    of any signature and through manual matches, iterated until no new key turns up; or
    why a full run is better (too many)."""
    width = len(chains(definition))
    partners: dict[int, list[int]] = {}  # pos -> every pos of its manual match
    for match in manual.matches:
        members = [*match.left_rows, *(-p for p in match.right_rows)]
        for pos in members:
            partners[pos] = members
    frontier: list[set[str]] = [set() for _ in range(width)]
    for which, rows in new:
        for n, column in enumerate(side_keys(definition, which, rows)):
            frontier[n].update(k for k in column if k is not None)
    seen: list[set[str]] = [set() for _ in range(width)]
    found: dict[int, KeyRow] = {}
    while any(frontier):
        fetched: list[KeyRow] = []
        for n, values in enumerate(frontier):
            seen[n] |= values
            if values:
                fetched += reconciliation_keys.by_keys(conn, resource_id, n, list(values))
        frontier = [set() for _ in range(width)]
        while fetched:
            more = _take(fetched, found, seen, frontier, partners)
            fetched = reconciliation_keys.by_positions(conn, resource_id, more)
        if len(found) > limit:
            return f"the new rows share keys with more than {int(limit)} rows"
    return list(found.values())


def _take(
    fetched: list[KeyRow],
    found: dict[int, KeyRow],
    seen: list[set[str]],
    frontier: list[set[str]],
    partners: dict[int, list[int]],
) -> list[int]:
    """Add the rows not yet found, their keys not yet looked up to the frontier; the
    positions of their manual matches' rows not yet found."""
    more: set[int] = set()
    for row in fetched:
        if row[0] in found:
            continue
        found[row[0]] = row
        for n, key in enumerate(row[2:]):
            if key is not None and key not in seen[n]:
                frontier[n].add(key)
        more.update(p for p in partners.get(row[0], ()) if p not in found)
    return list(more)


class KeyTable:
    """The `Companion` of a full run (services/derived/builders.py): the key table of every
    row it read, staged beside its output and published with it."""

    def __init__(
        self,
        resource_id: int,
        definition: ReconciliationDefinition,
        sides: Sequence[tuple[SideTable, Sequence[int]]],
    ) -> None:
        self._resource_id = resource_id
        self._definition = definition
        self._sides = sides

    def stage(self, engine: Engine, guard: Guard) -> None:
        width = len(chains(self._definition))

        def rows() -> Iterator[KeyRow]:
            for which, (side_rows, row_ids) in zip(
                (SideName.LEFT, SideName.RIGHT), self._sides, strict=True
            ):
                yield from key_rows(self._definition, which, side_rows, row_ids)

        reconciliation_keys.stage(engine, self._resource_id, width, rows(), guard)

    def swap(self, conn: Connection) -> None:
        reconciliation_keys.swap(conn, self._resource_id)

    def discard(self, engine: Engine, guard: Guard) -> None:
        reconciliation_keys.discard_old(engine, self._resource_id, guard)
