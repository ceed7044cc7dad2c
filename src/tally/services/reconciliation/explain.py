"""Why a row is in no match: the pass that explains it, its nearest candidate, what failed.

Which pass explains an unmatched row: the last pass with keys under which some row of the
other side (matched or not) has equal keys, since the later passes are the more lenient
ones; a row that no keyed pass finds a candidate for is explained by the last pass without
keys if there is one (its nearest row by amount, else by date), else as having no
candidate under the first pass where its keys are not empty (`no ledger row with
reference 'INV-9'`), or as having empty keys.

Within the explaining pass:
- a group pass that tried the row and failed gives its own words (several rows of the one
  side sharing the keys, a group sum out of tolerance, a rejected group);
- else the nearest free candidate (smallest amount difference, then date difference, then
  position) and every condition it fails (`nearest ledger row 812 (reference REF-7):
  amount differs by 0.07, tolerance 0.05`);
- else, every candidate being taken, the nearest one and the match that took it
  (`ledger row 812 (reference REF-7) was matched to bank row 77 by pass 'same reference'`),
  or the resolution that closed it (`... was resolved by an analyst (timing)`).

Where the run matches within currencies, candidates are found by the keys alone (the
engine's keys hold the currency too), so that a row whose only candidates are in another
currency says so (`currency differs: USD against EUR`, the row's own currency first);
candidates of the row's own currency are preferred to the others, as free ones are to
taken ones, and an amount is never compared across currencies.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from itertools import compress, count

from tally.core.reconciliation import MatchPass, MatchStatus, PassType
from tally.services.reconciliation import reasons
from tally.services.reconciliation.state import FREE, RESOLVED, Run, Side

# This side's keys under a pass; the other side's rows (any state) under each key this
# side's unmatched rows have; how many of this side's rows have each of those keys.
Index = tuple[Sequence[Hashable | None], dict[Hashable | None, list[int]], Counter[Hashable | None]]
Sorted = tuple[list[int], list[int]]  # rows' amounts (or days) ascending, and the rows
MANY = 64  # candidates beyond which the nearest is found by bisection


def unmatched(run: Run) -> tuple[dict[int, str], dict[int, str]]:
    """A reason for every row in no match, per side: position -> text, ascending."""
    return _Explainer(run, run.left).reasons(), _Explainer(run, run.right).reasons()


class _Explainer:
    def __init__(self, run: Run, side: Side) -> None:
        self.run = run
        self.side = side
        self.other = run.opposite(side)
        self.rows = side.free()
        passes = run.definition.passes
        self.keyed = [i for i, p in enumerate(passes) if p.keys]
        self.keyless = [i for i, p in enumerate(passes) if not p.keys]
        self._pools: dict[str | None, Sorted] = {}  # currency -> a keyless pass's rows
        # (id(candidates), currency) -> those rows (of that currency, if any) sorted
        self._many: dict[tuple[int, str | None], Sorted] = {}
        self._unfound: list[tuple[Sequence[Hashable | None], MatchPass, str]] | None = None

    def reasons(self) -> dict[int, str]:
        if not self.rows:
            return {}
        indexes: list[tuple[int, Index]] = []
        built: dict[object, Index] = {}
        for pass_index in reversed(self.keyed):
            match_pass = self.run.definition.passes[pass_index]
            specs = (self.run.spec(match_pass, self.side.which), self._other_spec(match_pass))
            if specs not in built:
                built[specs] = self._index(match_pass)
            indexes.append((pass_index, built[specs]))
        return {self.side.positions[i]: self._explain(i, indexes) for i in self.rows}

    def _other_spec(self, match_pass: MatchPass) -> object:
        return self.run.spec(match_pass, self.other.which)

    def _index(self, match_pass: MatchPass) -> Index:
        """See `Index`: only the keys of this side's unmatched rows are looked at."""
        own = self.side.keys(self.run.spec(match_pass, self.side.which), currency=False)
        theirs = self.other.keys(self.run.spec(match_pass, self.other.which), currency=False)
        needed = {own[i] for i in self.rows}
        needed.discard(None)
        found: dict[Hashable | None, list[int]] = {}
        if needed:
            for j in compress(count(), map(needed.__contains__, theirs)):
                found.setdefault(theirs[j], []).append(j)
        return own, found, Counter(compress(own, map(needed.__contains__, own)))

    def _explain(self, i: int, indexes: list[tuple[int, Index]]) -> str:
        chosen: tuple[int, list[int]] | None = None
        for pass_index, (own, found, own_counts) in indexes:
            key = own[i]
            candidates = found.get(key) if key is not None else None
            if not candidates:
                continue
            one_to_one = self.run.definition.passes[pass_index].type is PassType.ONE_TO_ONE
            if chosen is None or one_to_one:
                chosen = pass_index, candidates
            if not self._one_to_one_inside_group(pass_index, own_counts[key], candidates):
                break
        if chosen is not None:
            return self._nearest(chosen[0], i, chosen[1])
        if self.keyless:
            nearest = self._keyless(self.keyless[-1], i)
            return f"{self._no_candidate(i)}; {nearest}" if self.keyed else nearest
        return self._no_candidate(i)

    def _one_to_one_inside_group(self, pass_index: int, mine: int, theirs: list[int]) -> bool:
        """A group pass whose group would hold one row a side says less than a one-to-one
        pass before it, whose tolerance and window are the row's real yardstick
        (`amount differs by 0.07, tolerance 0.05`): the explanation moves there."""
        if self.run.definition.passes[pass_index].type is PassType.ONE_TO_ONE:
            return False
        return len(theirs) == 1 and mine == 1

    def _nearest(self, pass_index: int, i: int, candidates: list[int]) -> str:
        failure = self.run.failures.get((self.side.which, i))
        if failure is not None and failure[0] == pass_index:
            return failure[1]
        if len(candidates) > MANY:
            return self._describe(pass_index, i, self._nearest_of_many(i, candidates))
        pool = self._same_currency(i, candidates)
        taken = self.other.taken
        free = [j for j in pool if taken[j] == FREE]
        j = min(free or pool, key=lambda j: self._distance(i, j))
        return self._describe(pass_index, i, j)

    def _code(self, i: int) -> str | None:
        """Row i's currency, where the run matches within currencies."""
        codes = self.side.currencies
        return None if codes is None else codes[i]

    def _same_currency(self, i: int, candidates: Sequence[int]) -> Sequence[int]:
        """The candidates in row i's currency, or all of them when none is (or where
        currencies are not compared, or row i's is empty)."""
        code, theirs = self._code(i), self.other.currencies
        if code is None or theirs is None:
            return candidates
        same = [j for j in candidates if theirs[j] == code]
        return same or candidates

    def _nearest_of_many(self, i: int, candidates: list[int]) -> int:
        """Among many candidates (a key most rows share), the nearest by amount (by date
        without amounts) by bisection: of the row's currency first, free rows first, then
        the lowest position."""
        code = self._code(i)
        cached = self._many.get((id(candidates), code))
        if cached is None:
            taken = self.other.taken
            pool = self._same_currency(i, candidates)
            free = self._sorted(j for j in pool if taken[j] == FREE)
            cached = self._many[id(candidates), code] = free if free[1] else self._sorted(pool)
        value = (self.side.amounts if self.run.amounts else self.side.days)[i]
        found = _closest(cached, value) if value is not None else None
        return candidates[0] if found is None else found

    def _describe(self, pass_index: int, i: int, j: int) -> str:
        """What fails between row i and its nearest row j of the other side, or, j being
        taken, which match took it."""
        match_pass = self.run.definition.passes[pass_index]
        row = reasons.rows(self.other, [j])
        if match_pass.keys:
            row += f" ({reasons.key_values(self.run, self.other, j, match_pass)})"
        taken = self.other.taken[j]
        if taken == FREE or self._currency_fails(i, j):  # (the currency says more)
            return f"{match_pass.name}: nearest {row}: {self._failed(match_pass, i, j)}"
        if taken == RESOLVED:
            code = self.run.resolved[self.other.which][j][0]
            return f"{match_pass.name}: {row} was resolved by an analyst ({code})"
        match = self.run.match(taken)
        mine = match.left if self.side is self.run.left else match.right
        rows = f"{self.side.label} row{'s' if len(mine) > 1 else ''} {', '.join(map(str, mine))}"
        manual = match.status is MatchStatus.MANUAL
        how = "by an analyst" if manual else f"by pass '{match.pass_name}'"
        return f"{match_pass.name}: {row} was matched to {rows} {how}"

    def _currency_fails(self, i: int, j: int) -> bool:
        """Whether row i and row j of the other side could never match for their
        currencies (different, or one empty), where the run compares them."""
        mine, theirs = self.side.currencies, self.other.currencies
        if mine is None or theirs is None:
            return False
        return mine[i] is None or theirs[j] is None or mine[i] != theirs[j]

    def _distance(self, i: int, j: int) -> tuple[bool, int, bool, int, int]:
        run, mine, theirs = self.run, self.side, self.other
        a, b = mine.amounts[i], theirs.amounts[j]
        x, y = mine.days[i], theirs.days[j]
        gap = abs(a - b) if run.amounts and a is not None and b is not None else None
        shift = abs(x - y) if run.dates and x is not None and y is not None else None
        return (gap is None, gap or 0, shift is None, shift or 0, j)

    def _failed(self, match_pass: MatchPass, i: int, j: int) -> str:
        """Every condition of the pass the pair (row i of this side, row j of the other)
        fails."""
        run = self.run
        left, right = run.left, run.right
        li, ri = (i, j) if self.side is left else (j, i)
        problems = []
        differs = False
        if run.currencies:
            codes = left.currencies[li], right.currencies[ri]  # type: ignore[index]
            problems += [
                f"{s.label} currency is empty"
                for s, v in zip((left, right), codes, strict=True)
                if v is None
            ]
            if None not in codes and codes[0] != codes[1]:
                differs = True  # amounts of two currencies are not compared
                mine, theirs = codes if self.side is left else codes[::-1]
                problems.append(f"currency differs: {mine} against {theirs}")
        if run.amounts:
            a, b = left.amounts[li], right.amounts[ri]
            problems += [
                f"{s.label} amount is empty" for s, v in ((left, a), (right, b)) if v is None
            ]
            one_to_one = match_pass.type is PassType.ONE_TO_ONE
            if a is not None and b is not None and one_to_one and not differs:
                tolerance = run.tolerance(match_pass)
                if abs(a - b) > tolerance:
                    problems.append(
                        f"amount differs by {reasons.money(abs(a - b), run.scale)}, "
                        f"tolerance {reasons.money(tolerance, run.scale)}"
                    )
        if run.dates:
            x, y = left.days[li], right.days[ri]
            problems += [
                f"{s.label} date is empty" for s, v in ((left, x), (right, y)) if v is None
            ]
            before, after = match_pass.date_window
            if x is not None and y is not None and not before <= y - x <= after:
                window = reasons.window(match_pass.date_window)
                problems.append(f"{right.label} date {reasons.days(y - x)}, {window}")
        if (left.positions[li], right.positions[ri]) in run.rejected:
            problems.append("an analyst rejected this pair")
        return "; ".join(problems) or "not taken"

    def _keyless(self, pass_index: int, i: int) -> str:
        """The nearest row of the other side by amount (by date without amounts): of the
        row's currency first, free rows first."""
        match_pass = self.run.definition.passes[pass_index]
        compared = self.run.amounts or self.run.dates
        value = (self.side.amounts if self.run.amounts else self.side.days)[i]
        if compared and value is None:
            what = "amount" if self.run.amounts else "date"
            return f"{match_pass.name}: {self.side.label} {what} is empty"
        values, rows = self._pool(self._code(i))
        if not rows:
            return f"{match_pass.name}: no {self.other.label} row"
        found = _closest((values, rows), value) if compared and value is not None else None
        return self._describe(pass_index, i, rows[0] if found is None else found)

    def _pool(self, code: str | None) -> Sorted:
        """The rows a keyless pass explains a row of currency `code` by (sorted): the
        first of free rows of that currency, its rows, free rows, all rows that holds
        any (only the last two without a currency)."""
        cached = self._pools.get(code)
        if cached is not None:
            return cached
        other = self.other
        everyone = range(len(other.positions))
        pools: list[Iterable[int]] = [other.free(), everyone]
        if code is not None and other.currencies is not None:
            theirs = other.currencies
            pools[:0] = [[j for j in pool if theirs[j] == code] for pool in pools]
        found: Sorted = ([], [])
        for pool in pools:
            found = self._sorted(pool)
            if found[1]:
                break
        self._pools[code] = found
        return found

    def _sorted(self, rows: Iterable[int]) -> Sorted:
        """The other side's rows with an amount (or date), by it then by position."""
        theirs = self.other.amounts if self.run.amounts else self.other.days
        if not (self.run.amounts or self.run.dates):
            return [0 for _ in rows], list(rows)
        ordered = sorted((v, j) for j in rows if (v := theirs[j]) is not None)
        return [v for v, _ in ordered], [j for _, j in ordered]

    def _no_candidate(self, i: int) -> str:
        if self._unfound is None:  # per keyed pass: this side's keys, the normalisers
            self._unfound = []
            for pass_index in self.keyed:
                match_pass = self.run.definition.passes[pass_index]
                own = self.side.keys(self.run.spec(match_pass, self.side.which), currency=False)
                steps = {str(n): None for pair in match_pass.keys for n in pair.normalize}
                after = f" (after {', '.join(steps)})" if steps else ""
                self._unfound.append((own, match_pass, after))
        for own, match_pass, after in self._unfound:
            if own[i] is not None:
                keys = reasons.key_quoted(self.run, self.side, i, match_pass)
                return f"no {self.other.label} row with {keys}{after}"
        return f"{self.side.label} keys are empty: no pass can match this row"


def _closest(ordered: Sorted, value: int) -> int | None:
    """The row whose value is nearest to `value` (the lowest position among equals)."""
    values, rows = ordered
    if not rows:
        return None
    at = bisect_left(values, value)
    near = [bisect_left(values, values[at - 1])] if at > 0 else []
    near += [at] if at < len(values) else []
    k = min(near, key=lambda k: (abs(values[k] - value), rows[k]))
    return rows[k]
