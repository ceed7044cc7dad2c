"""/api/v2/transformations refuses SQL past its budget (issue #30) before checking it at
length: the same 400 naming the limit from POST, PUT and the preview, so no definition
is accepted that fails every run, and never a 500. On both backends."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.databases import make_settings
from support.factories import Tenant, make_tenant
from support.transformations import make_inputs, preview, transformation
from support.v2_api import problems
from tally.core.errors import DefinitionRejectedError
from tally.runtime import Runtime, build_runtime

BASE = "/api/v2/transformations"


def ctes(count: int) -> str:
    """The issue's 3,000 CTEs (90.8 KB): each reads all of the last."""
    body = ", ".join(
        f"c{i} AS (SELECT * FROM {'s' if i == 0 else f'c{i - 1}'})" for i in range(count)
    )
    return f"WITH {body} SELECT * FROM c{count - 1}"


BYTES = "more than TALLY_TRANSFORMATION_MAX_SQL_BYTES (65,536)"
DEPTH = "an expression nests more than TALLY_TRANSFORMATION_MAX_DEPTH (100) levels deep"
CASES = [
    pytest.param(
        "SELECT " + " || ".join(["s.payout_id"] * 1500) + " AS x FROM s",
        DEPTH,
        id="1500-term ||: was a 500 from the preview, accepted by POST",
    ),
    pytest.param(
        ctes(3000),
        f"the SQL is 93,799 bytes, {BYTES}",
        id="3000 CTEs: was 660 MB and 10 s a preview",
    ),
    pytest.param(ctes(200), "the SQL has 200 CTEs, more than TALLY_TRANSFORMATION_MAX_CTES (100)"),
    pytest.param(
        "SELECT " + " + ".join(["s.amount"] * 9000) + " AS x FROM s",
        f"the SQL is 99,016 bytes, {BYTES}",
        id="9000 terms: SQLite refused them after 30 s",
    ),
    pytest.param("SELECT " + " + ".join(["s.amount"] * 2000) + " AS x FROM s", DEPTH),
    pytest.param(
        "SELECT s.payout_id AS x FROM s WHERE s.payout_id IN ("
        + ", ".join(f"'PO-{n:06}'" for n in range(6_000))
        + ")",
        f"the SQL is 78,052 bytes, {BYTES}",
    ),
    pytest.param(
        "SELECT " + "lower(" * 30 + "s.payout_id" + ")" * 30 + " AS x FROM s",
        "the SQL nests parentheses, CASEs and prefix operators more than "
        "TALLY_TRANSFORMATION_MAX_NESTING (24) deep",
    ),
]


@pytest.mark.parametrize(("sql", "message"), CASES)
def test_post_put_and_preview_refuse_sql_past_a_limit_alike(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, sql: str, message: str
) -> None:
    inputs = make_inputs(runtime.engine, tenant)
    body = transformation(inputs, name="Big", sql=sql)
    existing = api.post(BASE, json=transformation(inputs), headers=tenant.v2_headers).json()
    answers = [
        api.post(BASE, json=body, headers=tenant.v2_headers),
        api.put(f"{BASE}/{existing['id']}", json=body, headers=tenant.v2_headers),
        api.post(f"{BASE}/preview", json=body, headers=tenant.v2_headers),
    ]
    for answer in answers:
        [(field, said)] = problems(answer, 400)
        assert field == "sql"
        assert said.startswith(message)


@pytest.fixture
def hurried(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Runtime:
    """A time limit spent before the check has read the SQL."""
    return build_runtime(
        make_settings(request, backend, tmp_path / "home", transformation_timeout_seconds=1e-9)
    )


def test_the_check_runs_within_the_time_limit_of_its_preview(hurried: Runtime) -> None:
    try:
        tenant = make_tenant(hurried.engine)
        body: dict[str, Any] = transformation(make_inputs(hurried.engine, tenant))
        for use in (partial(preview, hurried), hurried.transformations.create):
            with pytest.raises(DefinitionRejectedError) as refused:
                use(workspace_id=tenant.workspace_id, body=body)
            assert refused.value.problems[0].message == (
                "checking the SQL took longer than TALLY_TRANSFORMATION_TIMEOUT_SECONDS: "
                "make it smaller"
            )
    finally:
        hurried.close()
