"""A reconciliation's definition checked against its workspace: what the body's values
mean (bodies.py has read its JSON types). Every fault is named at once, by its
path as the client wrote it (`passes[1].keys[0].left`): DefinitionRejectedError, the
/api/v2 400.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, TypeVar

from tally.core.columns import Column, ColumnType
from tally.core.errors import DefinitionRejectedError, FieldProblem
from tally.core.reconciliation import (
    DEFAULT_RESOLUTION_REASONS,
    MANUAL_PASS_NAME,
    CreditDebit,
    KeyPair,
    MatchPass,
    Normalizer,
    PassType,
    ReconciliationDefinition,
    Side,
)
from tally.services.reconciliation.bodies import (
    MAX_WINDOW_DAYS,
    SIDE_NAME_PATTERN,
    TOLERANCE_PATTERN,
    CreditDebitBody,
    PassBody,
    ReconciliationDefinitionBody,
    SideBody,
)
from tally.services.reconciliation.output_columns import ROW

SHOWN_COLUMNS = 12  # columns a message lists when a name is not among them
E = TypeVar("E", PassType, Normalizer)
_SIDE_NAME_RE = re.compile(SIDE_NAME_PATTERN)
_TOLERANCE_RE = re.compile(TOLERANCE_PATTERN)
_AMOUNT_TYPES = (ColumnType.DECIMAL, ColumnType.INTEGER)
_DATE_TYPES = (ColumnType.DATE, ColumnType.TIMESTAMP)
_ARTICLE = {"amount": "an"}
_PLURAL = {"amount": "amounts", "date": "dates", "currency": "currencies"}


def check_definition(
    body: ReconciliationDefinitionBody,
    readable: Mapping[int, tuple[Column, ...] | None],
    *,
    name_taken: bool,
) -> ReconciliationDefinition:
    """The definition, or DefinitionRejectedError naming every fault.

    `readable` holds the resources this reconciliation may read (of its workspace, and
    not computed from its own output), with their columns, or None for a source still
    waiting for its first file; `name_taken`: another resource has the name."""
    problems: list[FieldProblem] = []
    if name_taken:
        problems.append(FieldProblem("name", f"a resource named {body.name!r} already exists"))
    columns = {
        side: _check_side(getattr(body, side), side, readable, problems)
        for side in ("left", "right")
    }
    if body.left.name == body.right.name:
        problems.append(FieldProblem("right.name", "must differ from the left side's name"))
    for role in ("amount", "date", "currency"):
        given = {side for side in ("left", "right") if getattr(getattr(body, side), role)}
        if len(given) == 1:
            (has,) = given
            lacks = "right" if has == "left" else "left"
            problems.append(
                FieldProblem(
                    f"{lacks}.{role}",
                    f"the {has} side has {_ARTICLE.get(role, 'a')} {role} column: "
                    f"the {lacks} side needs one too "
                    f"({_PLURAL[role]} are compared between the sides)",
                )
            )
    for side in ("left", "right"):
        if getattr(body, side).currency is not None and getattr(body, side).amount is None:
            problems.append(
                FieldProblem(
                    f"{side}.currency",
                    f"a currency column is the currency of the side's amounts: name "
                    f"{side}.amount too",
                )
            )
    if not body.passes:
        problems.append(FieldProblem("passes", "at least one pass is needed"))
    passes: list[MatchPass | None] = []
    seen: dict[str, int] = {}
    for i, match_pass in enumerate(body.passes):
        if match_pass.name in seen:
            problems.append(
                FieldProblem(
                    f"passes[{i}].name",
                    f"passes[{seen[match_pass.name]}] already has the name {match_pass.name!r}",
                )
            )
        seen.setdefault(match_pass.name, i)
        passes.append(_check_pass(match_pass, i, body, columns["left"], columns["right"], problems))
    reasons = _resolution_reasons(body.resolution_reasons, problems)
    if problems:
        raise DefinitionRejectedError(problems)
    return ReconciliationDefinition(
        body.name,
        _side(body.left),
        _side(body.right),
        tuple(p for p in passes if p is not None),
        reasons,
    )


def _resolution_reasons(given: list[str] | None, problems: list[FieldProblem]) -> tuple[str, ...]:
    """The codes a resolution may give: the default list when none is given."""
    if given is None:
        return DEFAULT_RESOLUTION_REASONS
    if not given:
        problems.append(FieldProblem("resolution_reasons", "at least one reason code is needed"))
    for k, code in enumerate(given):
        if not _SIDE_NAME_RE.fullmatch(code):
            problems.append(
                FieldProblem(
                    f"resolution_reasons[{k}]",
                    f"{code!r} is not a reason code: 1 to 40 letters, digits, '_' or '-'",
                )
            )
        elif code in given[:k]:
            problems.append(FieldProblem(f"resolution_reasons[{k}]", f"{code!r} is listed twice"))
    return tuple(given)


def _side(side: SideBody) -> Side:
    amount: str | CreditDebit | None = None
    if isinstance(side.amount, CreditDebitBody):
        amount = CreditDebit(side.amount.credit, side.amount.debit)
    elif side.amount is not None:
        amount = side.amount
    return Side(side.name, side.resource_id, amount, side.date, side.currency)


def _roles(side: SideBody, where: str) -> list[tuple[str, str, tuple[ColumnType, ...], str]]:
    """(field, column, the types it may have, their words) for each column the side
    names for a role: its amount (one column, or credit and debit), date and currency."""
    named: list[tuple[str, str | None, tuple[ColumnType, ...], str]] = []
    if isinstance(side.amount, CreditDebitBody):
        named += [
            (f"{where}.amount.credit", side.amount.credit, _AMOUNT_TYPES, "decimal or integer"),
            (f"{where}.amount.debit", side.amount.debit, _AMOUNT_TYPES, "decimal or integer"),
        ]
    else:
        named.append((f"{where}.amount", side.amount, _AMOUNT_TYPES, "decimal or integer"))
    named.append((f"{where}.date", side.date, _DATE_TYPES, "date or timestamp"))
    named.append((f"{where}.currency", side.currency, (ColumnType.TEXT,), "text"))
    return [(field, name, kinds, words) for field, name, kinds, words in named if name]


def _check_side(
    side: SideBody,
    where: str,
    readable: Mapping[int, tuple[Column, ...] | None],
    problems: list[FieldProblem],
) -> tuple[Column, ...] | None:
    """The side's columns when they can be checked against (None otherwise)."""
    if not _SIDE_NAME_RE.fullmatch(side.name):
        problems.append(
            FieldProblem(
                f"{where}.name",
                "must be 1 to 40 letters, digits, '_' or '-' (it prefixes the side's "
                "columns in the output, as in 'bank.amount')",
            )
        )
    if side.resource_id not in readable:
        problems.append(
            FieldProblem(
                f"{where}.resource_id",
                f"resource {side.resource_id} is not a resource of this workspace",
            )
        )
        return None
    columns = readable[side.resource_id]
    if columns is None:
        problems.append(
            FieldProblem(
                f"{where}.resource_id",
                f"resource {side.resource_id} has no columns yet: it takes them from its "
                "first file; define the reconciliation once a file is loaded, or give the "
                "source declared columns",
            )
        )
        return None
    if any(c.name == ROW for c in columns):
        problems.append(
            FieldProblem(
                f"{where}.resource_id",
                f"resource {side.resource_id} has a column named {ROW!r}, which would clash "
                f"with '{side.name}.{ROW}' (the row's position) in the output",
            )
        )
    if isinstance(side.amount, CreditDebitBody) and side.amount.credit == side.amount.debit:
        problems.append(
            FieldProblem(
                f"{where}.amount.debit",
                f"column {side.amount.debit!r} is {where}.amount.credit too: credit and debit "
                "are two columns (name one signed column as the amount instead)",
            )
        )
    for field, name, kinds, words in _roles(side, where):
        column = _column_problem(columns, name, side.resource_id, field, problems)
        if column is not None and column.type not in kinds:
            role = field.rsplit(".", 1)[-1]
            problems.append(
                FieldProblem(
                    field,
                    f"column {name!r} is {column.type}: {_ARTICLE.get(role, 'a')} {role} "
                    f"column must be {words}",
                )
            )
    return columns


def _column_problem(
    columns: tuple[Column, ...],
    name: str,
    resource_id: int,
    where: str,
    problems: list[FieldProblem],
) -> Column | None:
    found = next((c for c in columns if c.name == name), None)
    if found is None:
        names = ", ".join(repr(c.name) for c in columns[:SHOWN_COLUMNS])
        more = ", ..." if len(columns) > SHOWN_COLUMNS else ""
        problems.append(
            FieldProblem(
                where, f"resource {resource_id} has no column {name!r} (its columns: {names}{more})"
            )
        )
    return found


def _check_pass(
    body: PassBody,
    i: int,
    definition: ReconciliationDefinitionBody,
    left: tuple[Column, ...] | None,
    right: tuple[Column, ...] | None,
    problems: list[FieldProblem],
) -> MatchPass | None:
    where = f"passes[{i}]"
    before = len(problems)
    if body.name == MANUAL_PASS_NAME:
        problems.append(FieldProblem(f"{where}.name", f"{MANUAL_PASS_NAME!r} names manual matches"))
    kind = _enum(PassType, body.type, f"{where}.type", "type", problems)
    if kind is not None and kind is not PassType.ONE_TO_ONE and not body.keys:
        problems.append(
            FieldProblem(
                f"{where}.keys",
                f"a {kind} pass needs at least one key (a group is the rows sharing them)",
            )
        )
    keys = []
    for j, key in enumerate(body.keys):
        for side, columns in (("left", left), ("right", right)):
            if columns is not None:
                resource_id = getattr(definition, side).resource_id
                name = getattr(key, side)
                _column_problem(columns, name, resource_id, f"{where}.keys[{j}].{side}", problems)
        normalizers = [
            _enum(Normalizer, n, f"{where}.keys[{j}].normalize[{k}]", "normaliser", problems)
            for k, n in enumerate(key.normalize)
        ]
        keys.append(KeyPair(key.left, key.right, tuple(n for n in normalizers if n)))
    tolerance = _tolerance(body.amount_tolerance, f"{where}.amount_tolerance", problems)
    if tolerance and not (definition.left.amount and definition.right.amount):
        problems.append(
            FieldProblem(
                f"{where}.amount_tolerance",
                "a tolerance needs an amount column on both sides (left.amount, right.amount)",
            )
        )
    window = _window(body.date_window, f"{where}.date_window", problems)
    if window not in (None, (0, 0)) and not (definition.left.date and definition.right.date):
        problems.append(
            FieldProblem(
                f"{where}.date_window",
                "a date window needs a date column on both sides (left.date, right.date)",
            )
        )
    if len(problems) > before or kind is None or tolerance is None or window is None:
        return None
    return MatchPass(body.name, kind, tuple(keys), tolerance, window, body.auto_confirm)


def _enum(
    kind: type[E], value: str, where: str, what: str, problems: list[FieldProblem]
) -> E | None:
    try:
        return kind(value)
    except ValueError:
        known = ", ".join(str(k) for k in kind)
        problems.append(FieldProblem(where, f"unknown {what} {value!r}: one of {known}"))
        return None


def _tolerance(text: str, where: str, problems: list[FieldProblem]) -> Decimal | None:
    if not _TOLERANCE_RE.fullmatch(text):
        problems.append(
            FieldProblem(
                where,
                f'{text!r} is not a non-negative decimal string such as "0.05" (at most '
                "15 digits before the point and 18 after)",
            )
        )
        return None
    return Decimal(text)


def _window(value: list[Any], where: str, problems: list[FieldProblem]) -> tuple[int, int] | None:
    days = [_whole_days(v) for v in value]
    if len(days) != 2 or None in days:
        problems.append(
            FieldProblem(where, "must be [before, after], two whole numbers of days, e.g. [-3, 3]")
        )
        return None
    before, after = (int(d) for d in days if d is not None)
    if max(abs(before), abs(after)) > MAX_WINDOW_DAYS:
        problems.append(FieldProblem(where, f"must lie within {MAX_WINDOW_DAYS} days either way"))
        return None
    if before > after:
        problems.append(
            FieldProblem(where, f"before ({before}) must not be later than after ({after})")
        )
        return None
    return before, after


def _whole_days(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value if isinstance(value, int) else None
