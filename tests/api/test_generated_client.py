"""A Python client generated from the served OpenAPI document (issue #30, point 7): made
without a warning by openapi-python-client, it has every operation, and its functions
parse tally's answers (a 200 it cannot read would raise UnexpectedStatus) on both backends.

The one document, /api/v1/openapi.json, describes both APIs. The generator takes CSV
bodies as bytes when told so (`content_type_overrides`, as a user would tell it): it has
no CSV body type of its own.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from support.databases import make_settings
from support.factories import Tenant
from support.reconciliations import definition, make_pair
from support.servers import serve_app
from support.transformations import make_inputs, transformation
from tally.api.app import create_app
from tally.runtime import Runtime, build_runtime

GENERATOR = Path(sys.executable).with_name("openapi-python-client")
PACKAGE = "tally_client"  # from the document's title
CONFIG = """\
content_type_overrides:
  text/csv: application/octet-stream
  application/csv: application/octet-stream
  text/plain: application/octet-stream
"""
OPTIONS = ["--config", "config.yml", "--output-path", "out"]
OPERATIONS = {
    "reconciliation_api": {"create_reconciliation", "replace_reconciliation"},
    "transformation_api": {"create_transformation", "get_transformation"},
}


@pytest.fixture(scope="module")
def generated(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client's folder, generated from the document as served over HTTP."""
    folder = tmp_path_factory.mktemp("client")
    settings = make_settings(request, "sqlite", folder / "home")
    runtime = build_runtime(settings)
    try:
        with serve_app(create_app(settings, runtime)) as url:
            document = httpx.get(f"{url}/api/v1/openapi.json")
    finally:
        runtime.close()
    assert document.status_code == 200
    (folder / "openapi.json").write_bytes(document.content)
    (folder / "config.yml").write_text(CONFIG)
    # The generator formats its output with ruff, found on PATH: this environment's.
    env = {**os.environ, "PATH": f"{GENERATOR.parent}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run(
        [GENERATOR, "generate", "--path", "openapi.json", *OPTIONS],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "warning" not in output.lower(), output
    return folder / "out"


@pytest.fixture(scope="module")
def client_package(generated: Path) -> Iterator[ModuleType]:
    """The generated package, imported; forgotten again after the module's tests."""
    sys.path.insert(0, str(generated))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(generated))
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(f"{PACKAGE}.")]:
            del sys.modules[name]


def test_the_client_has_the_reconciliation_and_transformation_operations(
    generated: Path,
) -> None:
    api = generated / PACKAGE / "api"
    have = {group: {p.stem for p in (api / group).glob("*.py")} for group in OPERATIONS}
    assert [(g, op) for g, ops in OPERATIONS.items() for op in ops if op not in have[g]] == []


def operation(package: ModuleType, group: str, name: str) -> Any:
    return importlib.import_module(f"{package.__name__}.api.{group}.{name}")


def credentials(tenant: Tenant) -> dict[str, str]:
    return {
        "x_api_key": tenant.key,
        "x_svc_workspace": str(tenant.workspace_id),
        "x_svc_account": str(tenant.account_id),
    }


def test_the_client_creates_and_reads_a_transformation(
    runtime: Runtime, tenant: Tenant, client_package: ModuleType
) -> None:
    models = importlib.import_module(f"{PACKAGE}.models")
    body = models.TransformationDefinitionBody.from_dict(
        transformation(make_inputs(runtime.engine, tenant))
    )
    with (
        serve_app(create_app(runtime.settings, runtime)) as url,
        client_package.Client(base_url=url, raise_on_unexpected_status=True) as client,
    ):
        create = operation(client_package, "transformation_api", "create_transformation")
        made = create.sync(client=client, body=body, **credentials(tenant))
        assert isinstance(made, models.TransformationCreatedResponse), made
        get = operation(client_package, "transformation_api", "get_transformation")
        shown = get.sync(made.id, client=client, **credentials(tenant))
    assert isinstance(shown, models.TransformationResponse), shown
    assert (shown.name, shown.definition.sql) == ("Payouts", body.sql)


def test_the_client_creates_and_replaces_a_reconciliation(
    runtime: Runtime, tenant: Tenant, client_package: ModuleType
) -> None:
    models = importlib.import_module(f"{PACKAGE}.models")
    pair = make_pair(runtime.engine, tenant)
    body = models.ReconciliationDefinitionBody.from_dict(definition(pair))
    renamed = models.ReconciliationDefinitionBody.from_dict(definition(pair, name="Renamed"))
    with (
        serve_app(create_app(runtime.settings, runtime)) as url,
        client_package.Client(base_url=url, raise_on_unexpected_status=True) as client,
    ):
        create = operation(client_package, "reconciliation_api", "create_reconciliation")
        made = create.sync(client=client, body=body, **credentials(tenant))
        assert isinstance(made, models.ReconciliationCreatedResponse), made
        replace = operation(client_package, "reconciliation_api", "replace_reconciliation")
        shown = replace.sync(made.id, client=client, body=renamed, **credentials(tenant))
    assert isinstance(shown, models.ReconciliationResponse), shown
    assert (shown.name, shown.definition.left.name) == ("Renamed", "bank")
