"""last_run's oldest unmatched date per side (oldest.py): counted by a full run, moved by
an incremental one exactly as a full run counts it, and a full run asked for when the
dates it kept are all matched."""

from __future__ import annotations

import datetime as dt

from support.reconciliation_cases import definition, row, side_rows
from tally.core.reconciliation import SideName
from tally.services.reconciliation import oldest
from tally.services.reconciliation.matching import SideTable

KEYED = [{"name": "ref", "type": "one_to_one", "keys": [{"left": "ref", "right": "ref"}]}]
D = definition(KEYED)
JAN = dt.date(2024, 1, 1).toordinal()
LEFT, RIGHT = SideName.LEFT, SideName.RIGHT


def table(which: SideName, days: list[int | None]) -> SideTable:
    return SideTable.of(side_rows(D, which, [row(str(n), 100, day) for n, day in enumerate(days)]))


def test_a_full_run_keeps_the_earliest_unmatched_date_and_its_rows() -> None:
    left = table(LEFT, [JAN + 5, JAN + 2, JAN + 2, None, JAN])
    right = table(RIGHT, [JAN])
    shown, kept = oldest.full(D, [left, right], [{1: "", 2: "", 3: "", 4: ""}, {}])
    assert shown == {"left": {"date": "2024-01-03", "rows": 2}, "right": None}
    assert kept is not None
    assert kept["left"] == {"days": [[JAN + 2, 2], [JAN + 5, 1]], "through": None}


def test_without_dates_there_is_nothing_to_age() -> None:
    undated = definition(KEYED, date=False)
    tables = [table(LEFT, [None]), table(RIGHT, [None])]
    assert oldest.full(undated, tables, [{1: ""}, {}]) == (None, None)


def test_an_incremental_run_moves_rows_as_a_full_run_counts_them() -> None:
    left = table(LEFT, [JAN + 1, JAN + 3])
    right = table(RIGHT, [JAN + 9])
    _, kept = oldest.full(D, [left, right], [{1: "", 2: ""}, {1: ""}])
    # a late right row matches left row 1 (the oldest); left row 2 stays unmatched
    late_right = table(RIGHT, [JAN + 9, JAN + 1])
    examined_left = SideTable(left.positions[:1], tuple(k[:1] for k in left.keys), [100], [JAN + 1])
    examined_right = SideTable([2], tuple(k[1:] for k in late_right.keys), [100], [JAN + 1])
    found = oldest.adjusted(
        D,
        kept,
        [(LEFT, examined_left, 3), (RIGHT, examined_right, 2)],
        {LEFT: {1}, RIGHT: set()},
        {LEFT: {}, RIGHT: {}},
    )
    again = oldest.full(D, [left, late_right], [{2: ""}, {1: ""}])
    assert found == again
    assert again[0] == {
        "left": {"date": "2024-01-04", "rows": 1},
        "right": {"date": "2024-01-10", "rows": 1},
    }


def test_past_the_dates_kept_a_full_run_is_asked_for() -> None:
    days = [JAN + n for n in range(oldest.KEPT_DAYS + 1)]
    left = table(LEFT, days)
    _, kept = oldest.full(
        D, [left, table(RIGHT, [])], [dict.fromkeys(range(1, len(days) + 1), ""), {}]
    )
    assert kept is not None
    assert kept["left"]["through"] == JAN + oldest.KEPT_DAYS - 1
    assert len(kept["left"]["days"]) == oldest.KEPT_DAYS
    # every kept date matched: the next oldest is among rows the run did not read
    examined = SideTable(
        list(range(1, oldest.KEPT_DAYS + 1)),
        tuple(list(k[: oldest.KEPT_DAYS]) for k in left.keys),
        [100] * oldest.KEPT_DAYS,
        days[: oldest.KEPT_DAYS],
    )
    found = oldest.adjusted(
        D,
        kept,
        [(LEFT, examined, len(days) + 1)],
        {LEFT: set(range(1, oldest.KEPT_DAYS + 1)), RIGHT: set()},
        {LEFT: {}, RIGHT: {}},
    )
    assert isinstance(found, str)
    assert found == "every left row of the oldest unmatched dates was matched"


def test_an_action_moves_the_kept_dates_and_its_undo_puts_them_back() -> None:
    """Left rows on Jan 3 and Jan 5 unmatched; the Jan 3 row resolved by an analyst (out
    of unmatched): the oldest is Jan 5, as a full run with it resolved counts; undone,
    Jan 3 again. A row of a date past `through` changes nothing kept."""
    left = table(LEFT, [JAN + 2, JAN + 4])
    right = table(RIGHT, [])
    before, kept = oldest.full(D, [left, right], [{1: "", 2: ""}, {}])
    shown, moved = oldest.moved(D, kept, LEFT, [JAN + 2], -1)
    assert (shown, moved) == oldest.full(D, [left, right], [{2: ""}, {}])
    assert shown is not None
    assert shown["left"] == {"date": "2024-01-05", "rows": 1}
    assert oldest.moved(D, moved, LEFT, [JAN + 2], 1) == (before, kept)
    assert oldest.moved(definition(KEYED, date=False), None, LEFT, [JAN], -1) == (None, None)


def test_an_action_that_closes_every_kept_date_leaves_the_oldest_unknown() -> None:
    """More than KEPT_DAYS dates unmatched: an action closing every row of the kept ones
    cannot know the next (a date no run kept): shown `{"date": None, "rows": None}` (the
    console's "not known until the next run"); a row of a kept date reopened is the
    oldest again, since every row of the dates kept was counted."""
    days = [JAN + n for n in range(oldest.KEPT_DAYS + 1)]
    _, kept = oldest.full(
        D, [table(LEFT, days), table(RIGHT, [])], [dict.fromkeys(range(1, len(days) + 1), ""), {}]
    )
    closed = days[: oldest.KEPT_DAYS]
    shown, moved = oldest.moved(D, kept, LEFT, [*closed, days[-1]], -1)
    assert shown == {"left": {"date": None, "rows": None}, "right": None}
    assert moved is not None
    assert moved["left"]["days"] == []
    reopened, _ = oldest.moved(D, moved, LEFT, [JAN + 7], 1)
    assert reopened is not None
    assert reopened["left"] == {"date": "2024-01-08", "rows": 1}
