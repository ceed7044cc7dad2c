"""The resource table's state as its URL holds it, in the Data API's own grammar
(`amount__gt=10&ordering=-amount&fields=a,b&page=2&page_size=50`), so a console URL and
a Data API URL say the same thing; and the URLs each control of the table leads to."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from urllib.parse import urlencode

from tally.core.filters import OPERATOR_SEPARATOR, RESERVED_PARAMETERS

DEFAULT_PAGE_SIZE = 50
PAGE_SIZES = (25, 50, 100, 500)
MAX_PAGE_SIZE = PAGE_SIZES[-1]  # a larger page_size is capped, as the Data API caps its own
# The filter form's operators: (query-string suffix, what the form shows). The Data API's
# seven forms: `col=` and `col__exact=` (both "equal to"), gt, gte, lt, lte, in.
OPERATOR_CHOICES = (
    ("", "="),
    ("exact", "exact"),
    ("gt", ">"),
    ("gte", "≥"),
    ("lt", "<"),
    ("lte", "≤"),
    ("in", "in (comma-separated)"),
)


class BadViewError(Exception):
    """A page or page size that is not a whole number of at least 1."""


@dataclass(frozen=True)
class Filter:
    parameter: str  # as in the URL: `amount__gt`
    value: str
    column: str  # what it reads as: `amount`, `>`, `10`
    operator: str


@dataclass(frozen=True)
class TableView:
    filters: tuple[tuple[str, str], ...]  # (parameter, value), in the URL's order
    fields: str | None
    ordering: str | None
    page: int = 1
    page_size: int = DEFAULT_PAGE_SIZE

    @classmethod
    def of(cls, items: Sequence[tuple[str, str]]) -> TableView:
        """The view of a query string's items; BadViewError for a page or size that is
        not a number (the Data API answers 422 for those)."""
        given = dict(items)
        return cls(
            filters=tuple((k, v) for k, v in items if k not in RESERVED_PARAMETERS),
            fields=given.get("fields") or None,
            ordering=given.get("ordering") or None,
            page=_whole("page", given.get("page"), 1),
            page_size=min(_whole("page_size", given.get("page_size"), DEFAULT_PAGE_SIZE),
                          MAX_PAGE_SIZE),
        )  # fmt: skip

    def items(self, *, paged: bool = True) -> list[tuple[str, str]]:
        """The query string's items: filters, fields, ordering, then the page (left out
        at its defaults, or when not `paged`)."""
        items = list(self.filters)
        if self.fields:
            items.append(("fields", self.fields))
        if self.ordering:
            items.append(("ordering", self.ordering))
        if paged and self.page != 1:
            items.append(("page", str(self.page)))
        if paged and self.page_size != DEFAULT_PAGE_SIZE:
            items.append(("page_size", str(self.page_size)))
        return items

    def query(self, *, paged: bool = True) -> str:
        return urlencode(self.items(paged=paged))

    def data_api_query(self) -> str:
        """The same view as a Data API request: the page and its size always named (the
        API's default page size is not the console's)."""
        items = self.items(paged=False)
        items += [("page", str(self.page)), ("page_size", str(self.page_size))]
        return urlencode(items)

    def at_page(self, page: int) -> str:
        return replace(self, page=page).query()

    def sorted_by(self, column: str) -> str:
        """Ascending by `column`, or descending when it is already ascending; page 1."""
        ordering = f"-{column}" if self.ordering == column else column
        return replace(self, ordering=ordering, page=1).query()

    def without(self, index: int) -> str:
        filters = self.filters[:index] + self.filters[index + 1 :]
        return replace(self, filters=filters, page=1).query()

    def with_filter(self, column: str, suffix: str, value: str) -> str:
        parameter = f"{column}{OPERATOR_SEPARATOR}{suffix}" if suffix else column
        return replace(self, filters=(*self.filters, (parameter, value)), page=1).query()

    def with_fields(self, chosen: Sequence[str], every: Sequence[str]) -> str:
        """`fields` of the chosen columns (none, or the default ones in order: left out)."""
        fields = ",".join(chosen) if chosen and list(chosen) != list(every) else None
        return replace(self, fields=fields, page=1).query()

    def shown_filters(self, columns: Sequence[str]) -> list[Filter]:
        """Each filter as a column, an operator and a value (a parameter the resource
        does not know is shown as it is, so it can be removed)."""
        labels = dict(OPERATOR_CHOICES)
        shown = []
        for parameter, value in self.filters:
            column, sep, suffix = parameter.rpartition(OPERATOR_SEPARATOR)
            if parameter in columns or not sep or suffix not in labels:
                column, suffix = parameter, ""
            shown.append(Filter(parameter, value, column, labels[suffix]))
        return shown


def _whole(name: str, text: str | None, default: int) -> int:
    if text is None:
        return default
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise BadViewError(f"{name} must be a whole number, at least 1.")
    return int(text)
