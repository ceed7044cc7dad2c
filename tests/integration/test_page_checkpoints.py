"""Where pages start is remembered as the key of the row before them, in stored form:
a later page seeks from it. Decimals and timestamps are the values PostgreSQL returns in
its own types (Decimal, datetime), which must be translated before they are bound."""

from __future__ import annotations

import pytest

from support.factories import make_source, make_tenant, read_data
from tally.runtime import Runtime

ROWS = [
    (1, "30.10", "2024-03-01T10:00:00+02:00"),
    (2, "-5.25", "2024-03-01T07:59:59Z"),
    (3, "1000.00", "2024-02-28T23:00:00-05:00"),
    (4, "0.01", "2024-03-01T08:00:01Z"),
    (5, "30.10", "2024-01-15T12:30:00+00:00"),
    (6, "7.50", "2024-03-02T00:00:00+09:00"),
    (7, "-99.99", "2024-02-29T12:00:00Z"),
]
CSV = "id,amount,at\n" + "".join(f"{i},{a},{t}\n" for i, a, t in ROWS)


@pytest.mark.parametrize("ordering", ["amount", "-amount", "at", "-at"])
def test_pages_after_a_remembered_decimal_or_timestamp_key(
    uncached: Runtime, ordering: str
) -> None:
    tenant = make_tenant(uncached.engine)
    resource = make_source(uncached.engine, tenant, CSV)
    every = [r["id"] for r in read_data(uncached, tenant, resource.id, ordering=ordering)]
    # Pages in order leave a key behind at each page start; going back, later pages
    # start from those keys instead of from the first row.
    visits = [1, 2, 3, 4, 3, 2, 4]
    for page in visits:
        rows = read_data(uncached, tenant, resource.id, ordering=ordering, page=page, page_size=2)
        assert [r["id"] for r in rows] == every[(page - 1) * 2 : page * 2], (ordering, page)
