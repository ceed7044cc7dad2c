"""The Exceptions view reads the open rows through their own indexes and never starts a
column snapshot of the output: each action makes a new data version, and a snapshot of
a 1M-row output is seconds of a query process's CPU (docs/benchmarks.md, "Workbench").
The same query through the Data API does start one, so the test can tell. Both backends."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from support.console import SAME_ORIGIN, make_user, sign_in
from support.databases import make_settings
from support.exceptions import reconciled
from support.factories import Tenant
from tally.runtime import Runtime
from tally.settings import Settings
from tally.storage.resources import Resource, find_resource


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    """Snapshots for any resource, however small; no response cache to answer first."""
    return make_settings(
        request, backend, tmp_path / "home", snapshot_min_rows=0, response_cache=False
    )


def output(runtime: Runtime, output_id: int) -> Resource:
    with runtime.engine.connect() as conn:
        found = find_resource(conn, output_id)
    assert found is not None
    return found


def test_the_view_filtered_and_sorted_builds_no_snapshot_the_data_api_would(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    api.follow_redirects = False
    assert sign_in(api, make_user(runtime, tenant.workspace_id, "analyst").name).status_code == 303
    reconciliation_id, output_id = reconciled(runtime, tenant)
    snapshots = runtime.data_query.snapshots
    assert snapshots is not None
    filtered = {"left_min": "0.01", "left_sort": "-amount", "right_from": "2024-01-01"}
    for query in ({}, filtered, {"candidates": "left:5"}):
        page = api.get(f"/console/reconciliations/{reconciliation_id}/exceptions", params=query)
        assert page.status_code == 200, page.text
    snapshots.wait()
    assert snapshots.find(output(runtime, output_id)) is None  # none was built (one starts now)
    snapshots.wait()
    assert snapshots.find(output(runtime, output_id)) is not None  # what find() started

    # At the data version a resolution makes, the Data API asked the left side's filtered
    # query starts one: the view did not.
    url = f"/console/reconciliations/{reconciliation_id}/exceptions"
    done = api.post(
        url,
        data={"action": "resolve", "left": "6", "reason": "bank_fee", "note": "fee"},
        headers=SAME_ORIGIN,
    )
    assert done.status_code == 303, done.text
    assert api.get(done.headers["location"], params=filtered).status_code == 200
    answer = api.get(
        f"/api/v1/resources/{output_id}/data",
        params={"status": "unmatched", "bank.amount__gte": "0.01", "ordering": "-bank.amount"},
        headers=tenant.headers,
    )
    assert answer.status_code == 200, answer.text
    snapshots.wait()
    assert snapshots.find(output(runtime, output_id)) is not None
