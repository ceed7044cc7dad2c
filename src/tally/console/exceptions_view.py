"""The Exceptions view's state as its URL holds it, one set of parameters per side
(`left_sort=-amount&left_page=3&right_text=INV-1&right_from=2026-11-01`) and the row
whose candidates are open (`candidates=left:6`); and each side's view as the Data API
query on the reconciliation's output it is (`status=unmatched&bank._row__gte=1&
bank.amount__gte=10&ordering=-bank.amount`) and, with a text, the reference column
that contains it (the console's own condition: the Data API has no "contains")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from urllib.parse import urlencode

from tally.core.reconciliation import ReconciliationDefinition, Side, SideName
from tally.services.reconciliation.output_columns import amount_column

PAGE_SIZE = 50
# sort key -> (what the definition's column is, descending); age is today minus the date
SORTS = {
    "date": ("date", False),
    "-date": ("date", True),
    "age": ("date", True),
    "-age": ("date", False),
    "amount": ("amount", False),
    "-amount": ("amount", True),
}
DEFAULT_SORT = "date"  # oldest first
FILTERS = ("ref", "text", "min", "max", "from", "to")  # as the URL names them


class BadExceptionsViewError(Exception):
    """A parameter of the view that no control could have made."""


@dataclass(frozen=True)
class SideView:
    """One side's table: its sort, page and filters (each "" when not given)."""

    sort: str = DEFAULT_SORT
    page: int = 1
    ref: str = ""  # the reference column the text is compared with
    text: str = ""
    min: str = ""  # amount range, inclusive
    max: str = ""
    since: str = ""  # date range, inclusive (`from`, `to` in the URL)
    until: str = ""

    def filtered(self) -> bool:
        return any((self.text, self.min, self.max, self.since, self.until))


URL_NAMES = {"since": "from", "until": "to"}  # the attribute -> its name in the URL


@dataclass(frozen=True)
class ExceptionsView:
    left: SideView
    right: SideView
    candidates: tuple[SideName, int] | None = None

    @classmethod
    def of(cls, items: Sequence[tuple[str, str]]) -> ExceptionsView:
        given = dict(items)
        sides = {side: _side_view(given, side) for side in SideName}
        return cls(sides[SideName.LEFT], sides[SideName.RIGHT], _candidates(given))

    def side(self, which: SideName) -> SideView:
        return self.left if which is SideName.LEFT else self.right

    def items(self) -> list[tuple[str, str]]:
        """Every parameter not at its default, left side first."""
        items: list[tuple[str, str]] = []
        for which in SideName:
            chosen, default = self.side(which), SideView()
            for field in fields(SideView):
                value = getattr(chosen, field.name)
                if value != getattr(default, field.name):
                    items.append((f"{which}_{URL_NAMES.get(field.name, field.name)}", str(value)))
        if self.candidates is not None:
            items.append(("candidates", f"{self.candidates[0]}:{self.candidates[1]}"))
        return items

    def query(self) -> str:
        return urlencode(self.items())

    def changed(self, which: SideName, **changes: object) -> ExceptionsView:
        side = replace(self.side(which), **changes)  # type: ignore[arg-type]
        if which is SideName.LEFT:
            return replace(self, left=side)
        return replace(self, right=side)

    def at_page(self, which: SideName, page: int) -> str:
        return self.changed(which, page=page).query()

    def sorted_by(self, which: SideName, key: str) -> str:
        """By `key` (date, amount, age), the other way when it is sorted so; page 1."""
        sort = f"-{key}" if self.side(which).sort == key else key
        return self.changed(which, sort=sort, page=1).query()

    def without_filters(self, which: SideName) -> str:
        cleared = dict.fromkeys(("ref", "text", "min", "max", "since", "until"), "")
        return self.changed(which, page=1, **cleared).query()

    def with_candidates(self, which: SideName, row: int) -> str:
        return replace(self, candidates=(which, row)).query()

    def without_candidates(self) -> str:
        return replace(self, candidates=None).query()

    def other_items(self, which: SideName) -> list[tuple[str, str]]:
        """The parameters a side's filter form keeps as they are: the other side's, the
        open candidates and this side's sort (its filters and page come from the form)."""
        mine = {f"{which}_{name}" for name in (*FILTERS, "page")}
        return [(k, v) for k, v in self.items() if k not in mine]


def _side_view(given: Mapping[str, str], which: SideName) -> SideView:
    def value(name: str) -> str:
        return given.get(f"{which}_{name}", "").strip()

    sort = value("sort") or DEFAULT_SORT
    if sort not in SORTS:
        raise BadExceptionsViewError(f"{which}_sort must be one of {', '.join(SORTS)}.")
    page_text = value("page") or "1"
    if not page_text.isascii() or not page_text.isdigit() or int(page_text) < 1:
        raise BadExceptionsViewError(f"{which}_page must be a whole number, at least 1.")
    return SideView(
        sort=sort,
        page=int(page_text),
        ref=value("ref"),
        text=value("text"),
        min=value("min"),
        max=value("max"),
        since=value("from"),
        until=value("to"),
    )


def _candidates(given: Mapping[str, str]) -> tuple[SideName, int] | None:
    text = given.get("candidates", "")
    if not text:
        return None
    side, _, row = text.partition(":")
    if side not in tuple(SideName) or not row.isascii() or not row.isdigit() or int(row) < 1:
        raise BadExceptionsViewError("candidates must be a side and a row: left:6.")
    return SideName(side), int(row)


def reference_columns(definition: ReconciliationDefinition, which: SideName) -> list[str]:
    """The side's columns the passes key on, in the order the passes name them."""
    named = (getattr(key, str(which)) for p in definition.passes for key in p.keys)
    return list(dict.fromkeys(named))


def data_api_items(
    definition: ReconciliationDefinition, which: SideName, view: SideView
) -> list[tuple[str, str]]:
    """The side's exceptions as a Data API query on the output (without its page):
    unmatched rows of this side, the amount and date filters, the ordering (the text
    is `reference_contains`). BadExceptionsViewError for a filter on a column the side
    does not have."""
    side = definition.side(which)
    prefix = f"{side.name}."
    items = [("status", "unmatched"), (f"{prefix}_row__gte", "1")]
    amount = amount_column(side)
    for value, suffix, column in (
        (view.min, "gte", amount),
        (view.max, "lte", amount),
        (view.since, "gte", side.date),
        (view.until, "lte", side.date),
    ):
        if value:
            if column is None:
                raise BadExceptionsViewError(f"{side.name} has no column to filter that on.")
            items.append((f"{prefix}{column}__{suffix}", value))
    items.append(("ordering", _ordering(side, view.sort)))
    return items


def reference_contains(
    definition: ReconciliationDefinition, which: SideName, view: SideView
) -> tuple[str, str] | None:
    """The output's column the text is searched in (the chosen reference column, else
    the first) and the text: `RowsRequest.contains`, a condition of the console's own
    (the Data API's grammar has no "contains"); None without a text."""
    if not view.text:
        return None
    references = reference_columns(definition, which)
    chosen = view.ref or (references[0] if references else "")
    if chosen not in references:
        raise BadExceptionsViewError(f"{which}_ref must be one of the reference columns.")
    return f"{definition.side(which).name}.{chosen}", view.text


def _ordering(side: Side, sort: str) -> str:
    """The sort as the Data API's ordering; the rows' order when the side lacks the
    column (no date: age and date sort by position)."""
    kind, descending = SORTS[sort]
    column = side.date if kind == "date" else amount_column(side)
    name = f"{side.name}.{column if column is not None else '_row'}"
    return f"-{name}" if descending else name
