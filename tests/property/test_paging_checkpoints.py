"""Pages visited in any order, again and again, answer what the reference answers.

The Data API remembers where pages start (per data version, filter set and ordering)
and seeks there instead of counting past earlier rows. This drives that memory hard:
one filter set and ordering, pages requested in a random order with repeats, the
response cache off so every request reaches the page query.
"""

from __future__ import annotations

import dataclasses
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_query_semantics import GenTable, check_query, load, queries, tables

from support.factories import Tenant, make_tenant
from tally.runtime import Runtime


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(table=tables(), data=st.data())
def test_pages_in_any_order_match_the_reference(
    uncached: Runtime, table: GenTable, data: st.DataObject
) -> None:
    tenant: Tenant = make_tenant(uncached.engine)
    resource, model = load(uncached, tenant, table)
    query = data.draw(queries(table))
    names = [c.name for c in table.columns]
    ordering = data.draw(st.sampled_from(["", "-"])) + data.draw(st.sampled_from(names))
    query = dataclasses.replace(query, ordering=data.draw(st.sampled_from([ordering, None])))
    page_size = data.draw(st.integers(1, 7))
    last = max(1, math.ceil(len(table.cells) / page_size)) + 1
    visits = data.draw(st.lists(st.integers(1, last), min_size=1, max_size=12))
    for page in visits:
        check_query(
            uncached,
            tenant,
            resource,
            model,
            dataclasses.replace(query, page=page, page_size=page_size),
        )
