"""The grouped passes: `one_to_many` (one left row, several right rows) and its mirror
`many_to_one`. All of a key's fitting rows or none: no subset search.

A pass that tries a row and fails records why (`Run.failures`): several rows of the one
side sharing the key, a group's sum out of tolerance, a rejected group. explain.py gives
those words when this pass explains the row.
"""

from __future__ import annotations

from tally.core.reconciliation import PassType, SideName
from tally.services.reconciliation import reasons
from tally.services.reconciliation.passes import index_rows, shared_keys
from tally.services.reconciliation.state import Run, Side


def grouped(run: Run, pass_index: int) -> None:
    """`one_to_many` (one left row, many right rows) or `many_to_one` (the mirror): the one
    side's row must be the only free row with its keys; its group is every free row of the
    other side with those keys whose date fits, taken whole when the sum fits."""
    match_pass = run.definition.passes[pass_index]
    assert match_pass.keys, "a grouped pass has keys (the definition check refuses none)"
    one_which = SideName.LEFT if match_pass.type is PassType.ONE_TO_MANY else SideName.RIGHT
    one = run.side(one_which)
    many = run.opposite(one)
    one_keys = one.keys(run.spec(match_pass, one.which))
    many_keys = many.keys(run.spec(match_pass, many.which))
    ones = [i for i in one.free() if one_keys[i] is not None]
    one_first, one_shared = index_rows(one_keys, ones)
    many_first, many_shared = index_rows(many_keys, run.eligible(many, many_keys))
    keys = list(shared_keys(one_first, one_shared, many_first, many_shared))
    keys += [key for key in one_first if key in many_first]
    for key in keys:
        members = many_shared.get(key) or [many_first[key]]
        sharing = one_shared.get(key)
        if sharing:
            text = reasons.shared_key(run, pass_index, one, sharing)
            for i in sharing:
                run.failures[one.which, i] = (pass_index, text)
            for j in members:
                run.failures[many.which, j] = (pass_index, text)
            continue
        _group(run, pass_index, one, one_first[key], many, members)
    one.close_taken()
    many.close_taken()


def _group(run: Run, pass_index: int, one: Side, i: int, many: Side, members: list[int]) -> None:
    """Match row `i` of the one side with the members whose date fits, if their sum fits."""
    match_pass = run.definition.passes[pass_index]
    if (run.amounts and one.amounts[i] is None) or (run.dates and one.days[i] is None):
        return  # matches nothing; the reason says which value is empty
    if run.dates:
        before, after = match_pass.date_window
        sign = 1 if one.which is SideName.LEFT else -1  # the window is right minus left
        day = one.days[i]
        members = [j for j in members if before <= sign * (many.days[j] - day) <= after]  # type: ignore[operator]
        if not members:
            return
    lefts, rights = ([i], members) if one.which is SideName.LEFT else (members, [i])
    if run.rejected and any(
        (run.left.positions[a], run.right.positions[b]) in run.rejected
        for a in lefts
        for b in rights
    ):
        text = reasons.rejected_group(run, pass_index, one, i, many, members)
    elif run.amounts and abs(_sum(run.left, lefts) - _sum(run.right, rights)) > run.tolerance(
        match_pass
    ):
        text = reasons.group_sum(run, pass_index, one, i, many, members)
    else:
        run.add_match(pass_index, lefts, rights)
        return
    run.failures[one.which, i] = (pass_index, text)
    for j in members:
        run.failures[many.which, j] = (pass_index, text)


def _sum(side: Side, rows: list[int]) -> int:
    return sum(side.amounts[i] for i in rows)  # type: ignore[misc]
