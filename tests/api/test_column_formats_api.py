"""Formats per column over HTTP (issue #32, point 1): `POST /api/v2/sources` and
`POST /api/v2/webhooks` take the declared columns' formats and the lines to skip; a bad
declaration is a 422 naming the field; a file's warnings are shown on
`GET /api/v2/sources/{id}/files/{file_id}`. Both backends."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx
import pytest

from support.factories import Tenant, run_pipeline
from tally.core.formats import ColumnFormat, FileLayout, NumberFormat
from tally.runtime import Runtime
from tally.storage import resources

CSV = {"content-type": "text/csv"}
DECIMAL_SEPARATOR = "columns.0.decimal_separator"
THOUSANDS_SEPARATOR = "columns.0.thousands_separator"
GERMAN_AMOUNT = {
    "name": "Betrag",
    "type": "decimal",
    "decimal_separator": ",",
    "thousands_separator": ".",
    "negative": ["minus", "dr_cr"],
}


def post_source(api: httpx.Client, tenant: Tenant, body: dict[str, Any]) -> httpx.Response:
    return api.post("/api/v2/sources", json={"name": "bank", **body}, headers=tenant.v2_headers)


def problems(response: httpx.Response) -> list[tuple[str | None, str]]:
    assert response.status_code == 422, response.text
    return [(e["field"], e["message"]) for e in response.json()["errors"]]


def test_a_source_keeps_its_layout_and_a_file_loads_through_it(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    body = {
        "columns": [{"name": "Tag", "type": "date", "format": "DD.MM.YYYY"}, GERMAN_AMOUNT],
        "skip_leading_lines": 2,
        "skip_trailing_lines": 1,
    }
    response = post_source(api, ingestion_tenant, body)
    assert response.status_code == 201, response.text
    source_id = response.json()["id"]
    with runtime.engine.connect() as conn:
        stored = resources.get_resource(conn, source_id)
    assert stored.layout == FileLayout(
        2,
        1,
        (
            ("Tag", ColumnFormat(date="DD.MM.YYYY")),
            ("Betrag", ColumnFormat(number=NumberFormat(",", ".", ("minus", "dr_cr")))),
        ),
    )
    content = (
        "Konto;4711\nZeitraum;Oktober\nTag;Betrag\n"
        "01.10.2026;3.445,63\n02.10.2026;12,50 DR\nSumme;3.433,13\n"
    )
    fed = api.post(
        f"/api/v2/sources/{source_id}/feed-source",
        content=content.encode(),
        headers={**ingestion_tenant.v2_headers, **CSV},
    )
    assert fed.status_code == 202, fed.text
    run_pipeline(runtime)
    status = api.get(
        f"/api/v2/sources/{source_id}/files/{fed.json()['file_id']}",
        headers=ingestion_tenant.v2_headers,
    ).json()
    assert (status["status"], status["rows"], status["warnings"]) == ("delivered", 2, [])
    data = api.get(f"/api/v1/resources/{source_id}/data", headers=ingestion_tenant.headers)
    assert [(r["Tag"], Decimal(str(r["Betrag"]))) for r in data.json()["data"]] == [
        ("2026-10-01", Decimal("3445.63")),
        ("2026-10-02", Decimal("-12.50")),
    ]


def test_a_files_status_shows_the_date_formats_a_text_column_fits(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    source_id = post_source(api, ingestion_tenant, {}).json()["id"]
    fed = api.post(
        f"/api/v2/sources/{source_id}/feed-source",
        content=b"booked,amount\n01/10/2026,1.00\n",
        headers={**ingestion_tenant.v2_headers, **CSV},
    )
    run_pipeline(runtime)
    status = api.get(
        f"/api/v2/sources/{source_id}/files/{fed.json()['file_id']}",
        headers=ingestion_tenant.v2_headers,
    ).json()
    assert status["status"] == "delivered"
    [warning] = status["warnings"]
    assert warning.startswith("column 'booked' was loaded as text")
    assert "DD/MM/YYYY or MM/DD/YYYY" in warning


@pytest.mark.parametrize(
    ("column", "field", "words"),
    [
        ({"type": "date", "format": "DD/MM/YY"}, "columns.0.format", "unknown token"),
        ({"type": "date", "format": "DD/MM"}, "columns.0.format", "YYYY missing"),
        ({"type": "date", "format": "dd/mm/yyyy"}, "columns.0.format", "unknown token"),
        ({"type": "date", "format": "%d/%m/%Y"}, "columns.0.format", "unknown token"),
        ({"type": "date", "format": "DD/MM/YYYY HH:mm"}, "columns.0.format", "no time"),
        ({"type": "decimal", "format": "DD/MM/YYYY"}, "columns.0.format", "date and timestamp"),
        (
            {"type": "timestamp", "timezone": True, "format": "YYYY-MM-DD HH:mm"},
            "columns.0.format",
            "offset",
        ),
        ({"type": "text", "decimal_separator": ","}, DECIMAL_SEPARATOR, "decimal and integer"),
        ({"type": "decimal", "decimal_separator": ";"}, DECIMAL_SEPARATOR, "'.' or ','"),
        (
            {"type": "decimal", "decimal_separator": ",", "thousands_separator": ","},
            "columns.0.thousands_separator",
            "must differ",
        ),
        ({"type": "decimal", "thousands_separator": "."}, THOUSANDS_SEPARATOR, "must differ"),
        ({"type": "decimal", "negative": ["brackets"]}, "columns.0.negative.0", "parentheses"),
        ({"type": "decimal", "negative": []}, "columns.0.negative", "at least 1"),
        ({"type": "decimal", "negative": ["minus", "minus"]}, "columns.0.negative", "twice"),
    ],
)
def test_a_bad_declaration_is_422_naming_the_field(
    api: httpx.Client, ingestion_tenant: Tenant, column: dict[str, Any], field: str, words: str
) -> None:
    for path in ("/api/v2/sources", "/api/v2/webhooks"):
        body: dict[str, Any] = {"name": "bank", "columns": [{"name": "x", **column}]}
        if path.endswith("webhooks"):
            body["webhook"] = {}
        response = api.post(path, json=body, headers=ingestion_tenant.v2_headers)
        [(named, message)] = problems(response)
        assert named == field, response.text
        assert words in message, message


@pytest.mark.parametrize("value", [-1, 1001, 1.5, "2", True])
def test_lines_to_skip_are_a_small_whole_number(
    api: httpx.Client, ingestion_tenant: Tenant, value: Any
) -> None:
    for name in ("skip_leading_lines", "skip_trailing_lines"):
        [(field, _)] = problems(post_source(api, ingestion_tenant, {name: value}))
        assert field == name


def test_a_webhook_source_may_declare_columns_and_layout(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    response = api.post(
        "/api/v2/webhooks",
        json={
            "name": "bank hook",
            "webhook": {},
            "columns": [GERMAN_AMOUNT],
            "skip_leading_lines": 1,
        },
        headers=ingestion_tenant.v2_headers,
    )
    assert response.status_code == 201, response.text
    with runtime.engine.connect() as conn:
        stored = resources.get_resource(conn, response.json()["id"])
    assert not stored.is_placeholder
    assert [c.name for c in stored.columns] == ["Betrag"]
    assert stored.layout.skip_leading_lines == 1
    assert dict(stored.layout.formats)["Betrag"].number == NumberFormat(
        ",", ".", ("minus", "dr_cr")
    )


def test_a_webhook_refuses_two_columns_of_one_name(
    api: httpx.Client, ingestion_tenant: Tenant
) -> None:
    """As a source does: the rule no JSON Schema can state (uniqueness by `name`)."""
    columns = [{"name": "a", "type": "text"}, {"name": "a", "type": "date"}]
    response = api.post(
        "/api/v2/webhooks",
        json={"name": "twice", "webhook": {}, "columns": columns},
        headers=ingestion_tenant.v2_headers,
    )
    [(field, _)] = problems(response)
    assert field == "columns"


def test_a_webhook_without_columns_is_the_specs_placeholder(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    response = api.post(
        "/api/v2/webhooks",
        json={"name": "plain hook", "webhook": {}},
        headers=ingestion_tenant.v2_headers,
    )
    assert response.status_code == 201, response.text
    with runtime.engine.connect() as conn:
        stored = resources.get_resource(conn, response.json()["id"])
    assert stored.is_placeholder
    assert stored.layout.plain
