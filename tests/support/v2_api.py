"""What the /api/v2 tests of derived resources (reconciliations, transformations) read
the same way: the uniform error bodies and each problem of an error response."""

from __future__ import annotations

import httpx

FORBIDDEN = {"errors": [{"field": None, "message": "Forbidden"}]}
NOT_FOUND = {"errors": [{"field": None, "message": "Not Found"}]}
UNKNOWN_ID = 987654  # no derived resource has it


def problems(response: httpx.Response, status: int) -> list[tuple[str | None, str]]:
    """Each (field, message) of an error response, once its status and type are right."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    return [(e["field"], e["message"]) for e in response.json()["errors"]]
