"""A one-to-one pass inside a large key group, without listing its candidate pairs.

passes.py lists a key group's candidate pairs and sorts them into the greedy order
(smallest |amount difference|, then |date difference|, then the left row's content, the
right row's, then positions). A group that many rows of both sides share (a pass without
keys, a key most rows have, a wide tolerance or window) has up to rows x rows pairs:
5,000 rows a side with a wide tolerance were 25 million pairs, 2.8 GB and 45 seconds
(issue #30). Here memory grows with the group's rows only, and the pairs are the same.

The right rows are put in cells of equal (amount, day). The greedy order takes pairs
level by level, a level being one (|amount difference|, |date difference|). Each left
row waits in a heap at its nearest level holding a cell with a free right row it may
take, found by bisection over the cells' amounts and days, emptied cells skipped (`Skips`).
At a level, when no row has a choice (each waiting left row sees one free right row, and
no other left row sees it) the pairs are taken; else the rows' content is looked up, and
the left rows, in (content, position) order, each take the smallest (content, position)
free right row they may. That gives the sorted list's pairs: greedy on any order that
extends both sides' (content, position) orders gives one matching (the property tests
check the engine against a model that sorts every pair). A left row that lost its level
waits again at its next one.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from heapq import heapify, heappop, heappush
from itertools import islice

from tally.services.reconciliation.state import FREE, Run, Side

Level = tuple[int, int]  # (|amount difference|, |date difference|)


class Skips:
    """The indices 0..n-1 of a sorted list, some removed: the nearest kept index at or
    above (at or below) an index, in near-constant time (path halving)."""

    __slots__ = ("_down", "_up")

    def __init__(self, n: int) -> None:
        self._up = list(range(n + 1))  # _up[k] == k: k is kept (n: past the end)
        self._down = list(range(n + 1))  # the same for k - 1 (0: before the start)

    def remove(self, k: int) -> None:
        self._up[k] = k + 1
        self._down[k + 1] = k

    def above(self, k: int) -> int:
        """The smallest kept index >= k, or n."""
        up = self._up
        while up[k] != k:
            up[k] = up[up[k]]
            k = up[k]
        return k

    def below(self, k: int) -> int:
        """The largest kept index <= k, or -1."""
        down = self._down
        k += 1
        while down[k] != k:
            down[k] = down[down[k]]
            k = down[k]
        return k - 1


class LargeGroup:
    """One key group's rows (indices into the run's sides, all free) and the pass's
    tolerance and window (0 and (0, 0) for what the run does not compare)."""

    def __init__(
        self,
        run: Run,
        pass_index: int,
        lefts: list[int],
        rights: list[int],
        tolerance: int,
        window: tuple[int, int],
    ) -> None:
        self.run = run
        self.pass_index = pass_index
        self.lefts = lefts
        self.tolerance = tolerance if run.amounts else 0
        self.window = window if run.dates else (0, 0)
        left, right = run.left, run.right
        self.place = {i: _place(run, left, i) for i in lefts}  # left row -> (amount, day)
        self.amounts: list[int] = []  # the cells' distinct amounts, ascending
        self.days: list[list[int]] = []  # per amount, its cells' days, ascending
        self.first: list[int] = []  # per amount, the number of its first cell
        self.cells: list[list[int]] = []  # per cell, its right rows
        for (a, d), j in sorted((_place(run, right, j), j) for j in rights):
            if not self.amounts or self.amounts[-1] != a:
                self.amounts.append(a)
                self.days.append([])
                self.first.append(len(self.cells))
            if not self.days[-1] or self.days[-1][-1] != d:
                self.days[-1].append(d)
                self.cells.append([])
            self.cells[-1].append(j)
        self.free = [len(cell) for cell in self.cells]  # per cell, its free rows
        self.head = [0] * len(self.cells)  # per cell, where its free rows start
        self.ordered = [False] * len(self.cells)  # per cell: its rows by content?
        self.live_days = [len(days) for days in self.days]  # per amount, cells not empty
        self.amount_skips = Skips(len(self.amounts))
        self.day_skips = [Skips(len(days)) for days in self.days]
        self.left_content: dict[int, tuple[object, ...]] = {}
        self.right_content: dict[int, tuple[object, ...]] = {}
        self.banned: dict[int, set[int]] = {}  # left row -> the right rows rejected with it
        if run.rejected:
            at_left = {left.positions[i]: i for i in lefts}
            at_right = {right.positions[j]: j for j in rights}
            for a_position, b_position in run.rejected:
                if a_position in at_left and b_position in at_right:
                    self.banned.setdefault(at_left[a_position], set()).add(at_right[b_position])

    def match(self) -> None:
        """Take the group's pairs in the greedy order, level by level."""
        heap: list[tuple[int, int, int]] = []
        at: dict[int, list[int]] = {}  # left row -> its cells at its level in the heap
        for i in self.lefts:
            found = self.next_level(i, (0, 0))
            if found is not None:
                heap.append((*found[0], i))
                at[i] = found[1]
        heapify(heap)
        while heap:
            level = heap[0][:2]
            waiting: dict[int, list[int]] = {}  # left row -> its cells at this level
            lost = []
            while heap and heap[0][:2] == level:
                i = heappop(heap)[2]
                cells = [c for c in at[i] if self.free[c] and self._usable(i, c)]
                if cells:
                    waiting[i] = cells
                else:  # its cells emptied since: nothing nearer can have appeared
                    lost.append(i)
            for i in lost + self.take(waiting):
                found = self.next_level(i, level)
                if found is not None:
                    heappush(heap, (*found[0], i))
                    at[i] = found[1]

    def next_level(self, i: int, floor: Level) -> tuple[Level, list[int]] | None:
        """Left row i's nearest level from `floor` on where a cell has a free right row
        it may take, and those cells; None when there is none within the tolerance."""
        amount, day = self.place[i]
        amounts, days, skips = self.amounts, self.days, self.amount_skips
        earliest, latest = day + self.window[0], day + self.window[1]
        least = floor[0]
        low = bisect_right(amounts, amount - max(least, 1)) - 1  # amounts below, downwards
        high = bisect_left(amounts, amount + least)  # amounts at or above, upwards
        while True:
            low, high = skips.below(low), skips.above(high)
            below = amount - amounts[low] if low >= 0 else None
            above = amounts[high] - amount if high < len(amounts) else None
            gaps = [g for g in (below, above) if g is not None and g <= self.tolerance]
            if not gaps:
                return None
            gap = min(gaps)
            ks = [  # (an amount whose cells' days all lie outside the window: none)
                k
                for k, g in ((low, below), (high, above))
                if g == gap and days[k][0] <= latest and days[k][-1] >= earliest
            ]
            found = self._nearest_days(i, ks, floor[1] if gap == least else 0) if ks else None
            if found is not None:
                return (gap, found[0]), found[1]
            if below == gap:
                low -= 1
            if above == gap:
                high += 1

    def _nearest_days(self, i: int, ks: list[int], least: int) -> tuple[int, list[int]] | None:
        """Among the cells of amounts `ks`, those whose day is nearest to left row i's
        (|difference| >= least, within the window) with a free right row it may take."""
        day = self.place[i][1]
        before, after = self.window
        found: list[tuple[int, int]] = []  # (|date difference|, cell)
        for k in ks:
            days, skips, first = self.days[k], self.day_skips[k], self.first[k]
            t = skips.above(bisect_left(days, day + max(least, before, 0)))
            while t < len(days) and days[t] - day <= after:  # later or the same day
                if self._usable(i, first + t):
                    found.append((days[t] - day, first + t))
                    break
                t = skips.above(t + 1)
            latest = min(-max(least, 1), after)
            t = skips.below(bisect_right(days, day + latest) - 1)
            while t >= 0 and days[t] - day >= before:  # earlier
                if self._usable(i, first + t):
                    found.append((day - days[t], first + t))
                    break
                t = skips.below(t - 1)
        if not found:
            return None
        shift = min(s for s, _ in found)
        return shift, [c for s, c in found if s == shift]

    def _usable(self, i: int, cell: int) -> bool:
        """Whether a cell not emptied has a right row left row i may take."""
        return i not in self.banned or self._first(i, cell) is not None

    def _first(self, i: int, cell: int) -> int | None:
        """The cell's first free right row that left row i may take."""
        rows, taken = self.cells[cell], self.run.right.taken
        head = self.head[cell]
        while head < len(rows) and taken[rows[head]] != FREE:
            head += 1
        self.head[cell] = head
        banned = self.banned.get(i, ())
        return next(
            (j for j in islice(rows, head, None) if taken[j] == FREE and j not in banned), None
        )

    def take(self, waiting: dict[int, list[int]]) -> list[int]:
        """Match the left rows waiting at one level (row -> its cells); those that got
        nothing."""
        seen: set[int] = set()
        choice = False
        for i, cells in waiting.items():
            choice = choice or len(cells) > 1 or self.free[cells[0]] > 1 or i in self.banned
            choice = choice or not seen.isdisjoint(cells)
            seen.update(cells)
        if not choice:
            for i, cells in waiting.items():
                self._pair(i, self._first(i, cells[0]), cells[0])  # type: ignore[arg-type]
            return []
        self._order(seen)
        self._look_up(self.left_content, self.run.left, waiting)
        lost = []
        for i in sorted(waiting, key=lambda i: (self.left_content[i], i)):
            best: tuple[tuple[object, ...], int, int] | None = None
            for cell in waiting[i]:
                j = self._first(i, cell)
                if j is not None and (best is None or (self.right_content[j], j) < best[:2]):
                    best = self.right_content[j], j, cell
            if best is None:
                lost.append(i)
            else:
                self._pair(i, best[1], best[2])
        return lost

    def _order(self, cells: set[int]) -> None:
        """Put the free rows of these cells in (content, position) order, once per cell."""
        unordered = [c for c in cells if not self.ordered[c]]
        taken = self.run.right.taken
        for c in unordered:
            self.cells[c] = [j for j in self.cells[c][self.head[c] :] if taken[j] == FREE]
            self.head[c] = 0
        self._look_up(
            self.right_content, self.run.right, (j for c in unordered for j in self.cells[c])
        )
        for c in unordered:
            self.cells[c].sort(key=lambda j: (self.right_content[j], j))
            self.ordered[c] = True

    def _look_up(
        self, cache: dict[int, tuple[object, ...]], side: Side, rows: Iterable[int]
    ) -> None:
        """Add the content of the rows not yet looked up (one batch)."""
        cache.update(self.run.content_keys(side, {i for i in rows if i not in cache}))

    def _pair(self, i: int, j: int, cell: int) -> None:
        self.run.pair(self.pass_index, i, j)
        self.free[cell] -= 1
        if self.free[cell]:
            return
        k = bisect_right(self.first, cell) - 1
        self.day_skips[k].remove(cell - self.first[k])
        self.live_days[k] -= 1
        if not self.live_days[k]:
            self.amount_skips.remove(k)


def _place(run: Run, side: Side, i: int) -> tuple[int, int]:
    """A row's (amount, day), 0 for what the run does not compare (a pass's rows are
    not empty where it compares)."""
    amount = side.amounts[i] if run.amounts else 0
    day = side.days[i] if run.dates else 0
    return amount or 0, day or 0
