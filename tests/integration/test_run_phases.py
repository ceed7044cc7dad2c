"""GET of a reconciliation and of a transformation says what phase a run under way is in
and since when (services/derived/phases.py), on both backends, a real worker running it:
the run is held inside its matching, then inside its indexing (the output readable
meanwhile); after it no run is shown and `last_run.phases` keeps the seconds of each.
The phase a dead worker left is tested in test_derived_runs.py (the leases)."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from support.derived_runs import quick_settings, started_worker
from support.factories import Tenant, read_data
from support.reconciliation_runs import bank_and_ledger, definition_json, make_reconciliation
from support.transformations import make_inputs, transformation
from support.waiting import eventually
from tally.runtime import Runtime
from tally.services.derived.phases import PHASES
from tally.services.reconciliation import runs as reconciliation_runs
from tally.settings import Settings
from tally.storage.derived import outputs as derived_outputs

WAIT_SECONDS = 30.0


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    return quick_settings(request, backend, tmp_path, max_attempts=2)


class _Held:
    """A call the run makes (by its module's name for it), held on its first call until
    the test lets it go on: the run stays in that step's phase meanwhile."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, module: ModuleType, name: str) -> None:
        self.inside, self.go_on = threading.Event(), threading.Event()
        call = getattr(module, name)

        def held(*args: Any, **kwargs: Any) -> Any:
            if not self.inside.is_set():
                self.inside.set()
                assert self.go_on.wait(WAIT_SECONDS)
            return call(*args, **kwargs)

        monkeypatch.setattr(module, name, held)

    def reached(self) -> None:
        assert self.inside.wait(WAIT_SECONDS), "the run never got there"


@pytest.fixture
def holds(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[_Held, _Held]]:
    """The engine's matching and the output's indexing, held; let go at the end."""
    matching = _Held(monkeypatch, reconciliation_runs, "reconcile")
    indexing = _Held(monkeypatch, derived_outputs, "finish")
    yield matching, indexing
    matching.go_on.set()
    indexing.go_on.set()


def shown(api: httpx.Client, tenant: Tenant, path: str) -> Any:
    response = api.get(path, headers=tenant.v2_headers)
    assert response.status_code == 200, response.text
    return response.json()


def moment(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def idle(api: httpx.Client, tenant: Tenant, path: str) -> Any:
    def done() -> Any:
        found = shown(api, tenant, path)
        return found if found["state"] == "idle" else None

    return eventually(done, timeout=WAIT_SECONDS, what="the run to finish")


def test_a_reconciliations_run_shows_its_phase_and_since_when(
    runtime: Runtime, api: httpx.Client, tenant: Tenant, holds: tuple[_Held, _Held]
) -> None:
    matching, indexing = holds
    record = make_reconciliation(
        runtime.engine, tenant, definition_json(*bank_and_ledger(runtime, tenant))
    )
    path = f"/api/v2/reconciliations/{record.id}"
    assert shown(api, tenant, path)["run"] is None  # queued: no run under way
    with started_worker(runtime) as worker:
        worker.start()
        matching.reached()
        held = shown(api, tenant, path)
        assert (held["state"], held["run"]["phase"], held["last_run"]) == (
            "running",
            "matching",
            None,
        )
        started, since = moment(held["run"]["started_at"]), moment(held["run"]["phase_since"])
        assert started <= since
        matching.go_on.set()

        indexing.reached()
        held = shown(api, tenant, path)
        assert held["run"]["phase"] == "indexing"
        assert moment(held["run"]["phase_since"]) > since
        assert moment(held["run"]["started_at"]) == started
        assert len(read_data(runtime, tenant, record.resource_id)) == 6  # readable meanwhile
        indexing.go_on.set()
        done = idle(api, tenant, path)
    assert done["run"] is None
    assert done["last_run"]["started_at"] == started.isoformat()
    split = done["last_run"]["phases"]
    assert list(split) == ["starting", "reading", "matching", "writing", "publishing", "indexing"]
    assert all(seconds >= 0 for seconds in split.values())


def test_a_transformations_run_shows_its_phase_the_same_way(
    runtime: Runtime, api: httpx.Client, tenant: Tenant, holds: tuple[_Held, _Held]
) -> None:
    _, indexing = holds
    made = runtime.transformations.create(
        workspace_id=tenant.workspace_id, body=transformation(make_inputs(runtime.engine, tenant))
    )
    path = f"/api/v2/transformations/{made.id}"
    with started_worker(runtime) as worker:
        worker.start()
        indexing.reached()
        held = shown(api, tenant, path)
        assert (held["state"], held["run"]["phase"]) == ("running", "indexing")
        indexing.go_on.set()
        done = idle(api, tenant, path)
    assert done["run"] is None
    assert list(done["last_run"]["phases"]) == ["starting", "querying", "publishing", "indexing"]


def test_the_run_is_documented(api: httpx.Client) -> None:
    schemas = api.get("/api/v1/openapi.json").json()["components"]["schemas"]
    for model in ("ReconciliationResponse", "TransformationResponse"):
        assert "run" in schemas[model]["properties"]
    phases = schemas["RunUnderWayResponse"]["properties"]["phase"]["enum"]
    assert set(phases) == set(PHASES)
