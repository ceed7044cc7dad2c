"""Every error is mapped, and every documented error is provoked and answered as documented.

The sweep reads the OpenAPI document the server serves: for every route of both APIs and
every error status it documents, a request below provokes that status, and the answer's
body is validated against the schema the document gives for it (Datasette's
test_error_shape.py is the model). A status documented without a request to provoke it,
or a request for a status no longer documented, fails the sweep. Runs on both backends.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import jsonschema_rs
import pytest
from fastapi.exceptions import RequestValidationError
from sqlalchemy import text

from support.factories import Tenant, make_source, make_tenant
from support.reconciliations import Pair, definition, make_pair, write_output
from tally.api.errors import V1_ERRORS, V2_ERRORS, row_for
from tally.core import errors
from tally.core.sealing import SealError
from tally.runtime import Runtime

DATA = "/api/v1/resources/{resource_id}/data"
WEBHOOKS = "/api/v2/webhooks"
NOTIFY = "/api/v2/webhooks/{webhook_id}/feed-source"
SOURCES = "/api/v2/sources"
FEED = "/api/v2/sources/{source_id}/feed-source"
FILES = "/api/v2/sources/{source_id}/files"
FILE = "/api/v2/sources/{source_id}/files/{file_id}"
ATTEMPTS = FILE + "/attempts"
RECS = "/api/v2/reconciliations"
RESOURCES = "/api/v2/resources"
SOURCE = "/api/v2/sources/{source_id}"
ROTATE = SOURCE + "/webhook/rotate"
DELIVERIES = SOURCE + "/callback-deliveries"
RETRY = DELIVERIES + "/{delivery_id}/retry"
REC = RECS + "/{reconciliation_id}"
RUNS = REC + "/runs"
MATCHES = REC + "/matches"
MATCH = MATCHES + "/{match_id}"
CONFIRM = MATCH + "/confirm"
ACTIONS = REC + "/actions"
RESOLUTIONS = REC + "/resolutions"
RESOLUTION = RESOLUTIONS + "/{resolution_id}"
CANDIDATES = REC + "/rows/{side}/{row}/candidates"
TRS = "/api/v2/transformations"
TR = TRS + "/{transformation_id}"
TR_RUNS = TR + "/runs"
PREVIEW = TRS + "/preview"
UNKNOWN_ID = 987654
# Classes no route raises as themselves: families, and errors of the worker.
NOT_ANSWERED_BY_ANY_ROUTE = {
    errors.TallyError: "the root of the tree",
    errors.AuthError: "a family; each API answers its own members",
    errors.InvalidRequestError: "a family; each API answers its own members",
    errors.FetchError: "a download of the worker; recorded on the file, never an answer",
    SealError: "a stored secret that cannot be opened; the worker's status callbacks",
    errors.UsageError: "the CLI's: a command line it cannot read",
    errors.ListenError: "`tally serve`'s: its address cannot be bound, before any route",
    errors.SignInError: "the console's: its sign-in page says it",
    errors.SignInLockedError: "the console's: its sign-in page says it",
    errors.InviteNotValidError: "the console's: its invite page says it",
    errors.SessionEndedError: "the console's: a redirect to its sign-in page",
    errors.PasswordRejectedError: "the console's: its invite page says it",
}
# (method, path, status) -> the test that provokes it, when it needs more than a request.
PREVIEWS_REFUSED = "test_preview_limits.py::test_previews_past_their_limits_are_refused_while"
PROVOKED_ELSEWHERE = {
    ("get", DATA, 503): "test_data_api_errors.py::test_unreachable_database_is_503_without_a_trace",
    ("post", "/api/v2/transformations/preview", 429): PREVIEWS_REFUSED,
    ("post", "/api/v2/transformations/preview", 503): PREVIEWS_REFUSED,
    ("post", RETRY, 409): "test_source_page_api.py::test_deliveries_are_listed_and_retried_now",
}


@dataclass(frozen=True)
class World:
    tenant: Tenant
    resource_id: int  # a Data API resource of the tenant's
    foreign_id: int  # another workspace's resource
    source_id: int  # an ingestion source of the tenant's
    webhook_id: str
    pair: Pair  # a bank and a ledger source of the tenant's
    reconciliation_id: int  # of the pair, its match 1 `matched` in its output
    transformation_id: int = 0  # of the bank

    @property
    def credentials(self) -> dict[str, str]:
        return {
            "x-api-key": self.tenant.key,
            "x-svc-workspace": str(self.tenant.workspace_id),
            "x-svc-account": str(self.tenant.account_id),
        }


Provoke = Callable[[httpx.Client, World], httpx.Response]


def _data(api: httpx.Client, world: World, rid: int, headers: dict[str, str], **params: str) -> Any:
    return api.get(f"/api/v1/resources/{rid}/data", headers=headers, params=params)


def _feed(api: httpx.Client, world: World, headers: dict[str, str], body: bytes) -> Any:
    url = f"/api/v2/sources/{world.source_id}/feed-source"
    return api.post(url, headers={**world.credentials, **headers}, content=body)


def _announce_a_huge_body(api: httpx.Client, world: World) -> httpx.Response:
    """A body announced far over TALLY_MAX_FILE_BYTES is refused on its Content-Length
    alone; sent on a raw socket, as no client announces what it does not send."""
    headers = {**world.credentials, "Content-Type": "text/csv", "Content-Length": str(2**40)}
    request = f"POST /api/v2/sources/{world.source_id}/feed-source HTTP/1.1\r\n"
    request += f"Host: {api.base_url.host}\r\nConnection: close\r\n"
    request += "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
    with socket.create_connection((api.base_url.host, api.base_url.port), timeout=30) as sock:
        sock.sendall(request.encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, body = answer.split(b"\r\n\r\n", 1)
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    fields = [tuple(line.split(": ", 1)) for line in header_lines]
    return httpx.Response(int(status_line.split()[1]), headers=fields, content=body)


def _notify(api: httpx.Client, world: World, webhook_id: str, body: bytes) -> Any:
    return api.post(f"/api/v2/webhooks/{webhook_id}/feed-source", content=body)


def _files(api: httpx.Client, world: World, suffix: str, **params: str) -> Any:
    url = f"/api/v2/sources/{world.source_id}/files{suffix}"
    return api.get(url, headers=world.credentials, params=params)


def _retract_a_queued_file(api: httpx.Client, world: World) -> Any:
    """A file not delivered (queued: no worker runs here) cannot be taken back: 409."""
    queued = _feed(api, world, {"Content-Type": "text/csv"}, b"a\n1\n").json()["file_id"]
    url = f"/api/v2/sources/{world.source_id}/files/{queued}"
    return api.delete(url, headers=world.credentials)


def _create(api: httpx.Client, world: World, path: str, body: Any, *, signed: bool = True) -> Any:
    return api.post(path, headers=world.credentials if signed else {}, json=body)


def _provision_fails(api: httpx.Client, world: World, runtime: Runtime, path: str) -> Any:
    # The next resources' tables exist already: creating the table really fails.
    with runtime.engine.begin() as conn:
        for n in range(1, 100):
            conn.execute(text(f"CREATE TABLE IF NOT EXISTS r_{n} (x INTEGER)"))
    if path == RECS:
        return _create(api, world, path, definition(world.pair, name=f"unlucky {path}"))
    if path == TRS:
        return _create(api, world, path, _transformation(world, f"unlucky {path}"))
    body = {"name": f"unlucky {path}", **({"webhook": {}} if path == WEBHOOKS else {})}
    return _create(api, world, path, body)


def _rec(api: httpx.Client, world: World, method: str, suffix: str = "", **kwargs: Any) -> Any:
    url = f"{RECS}/{world.reconciliation_id}{suffix}"
    return api.request(method, url, headers=world.credentials, **kwargs)


def _read_by_another(api: httpx.Client, world: World) -> Any:
    """DELETE of a reconciliation whose output another one reads."""
    read = _create(api, world, RECS, definition(world.pair, name="read")).json()
    reader = definition(world.pair, name="reader")
    reader["left"] = {"name": "bank", "resource_id": world.pair.bank}
    reader["right"] = {"name": "read", "resource_id": read["resource_id"]}
    reader["passes"] = [{"name": "p", "type": "one_to_one", "keys": []}]
    assert _create(api, world, RECS, reader).status_code == 201
    return api.delete(f"{RECS}/{read['id']}", headers=world.credentials)


def _transformation(world: World, name: str, sql: str = "SELECT * FROM s") -> dict[str, Any]:
    return {"name": name, "inputs": {"s": world.pair.bank}, "sql": sql}


def _tr(api: httpx.Client, world: World, method: str, **kwargs: Any) -> Any:
    url = f"{TRS}/{world.transformation_id}"
    return api.request(method, url, headers=world.credentials, **kwargs)


def _transformation_read_by_another(api: httpx.Client, world: World) -> Any:
    """DELETE of a transformation whose output another one reads."""
    read = _create(api, world, TRS, _transformation(world, "read t")).json()
    reader = {"name": "reader t", "inputs": {"r": read["resource_id"]}, "sql": "SELECT * FROM r"}
    assert _create(api, world, TRS, reader).status_code == 201
    return api.delete(f"{TRS}/{read['id']}", headers=world.credentials)


def _preview_too_long(api: httpx.Client, world: World) -> Any:
    """A preview whose query fails as it runs (a value past int64)."""
    body = _transformation(world, "p", "SELECT 9223372036854775807 + 1 AS n FROM s")
    return _create(api, world, PREVIEW, body)


def _crashes(api: httpx.Client, world: World, runtime: Runtime) -> Any:
    # A table the registration writes is gone: a failure no service expects.
    with runtime.engine.begin() as conn:
        conn.execute(text("ALTER TABLE webhooks RENAME TO webhooks_gone"))
    return _create(api, world, WEBHOOKS, {"name": "crashing", "webhook": {}})


PROVOKERS: dict[tuple[str, str, int], Provoke] = {
    ("get", DATA, 400): lambda a, w: _data(a, w, w.resource_id, w.tenant.headers, nope="1"),
    ("get", DATA, 401): lambda a, w: _data(a, w, w.resource_id, {"workspace_id": "1"}),
    ("get", DATA, 403): lambda a, w: _data(a, w, w.foreign_id, w.tenant.headers),
    ("get", DATA, 404): lambda a, w: _data(a, w, UNKNOWN_ID, w.tenant.headers),
    ("get", DATA, 422): lambda a, w: _data(a, w, w.resource_id, w.tenant.headers, page="0"),
    ("post", WEBHOOKS, 400): lambda a, w: _create(a, w, WEBHOOKS, {"name": "fed", "webhook": {}}),
    ("post", WEBHOOKS, 403): lambda a, w: _create(a, w, WEBHOOKS, {}, signed=False),
    ("post", WEBHOOKS, 422): lambda a, w: _create(a, w, WEBHOOKS, {"name": "no webhook"}),
    ("post", NOTIFY, 400): lambda a, w: _notify(a, w, w.webhook_id, b'{"file_url": "ftp://x"}'),
    ("post", NOTIFY, 404): lambda a, w: _notify(a, w, "whk_unknown", b"{}"),
    ("post", NOTIFY, 422): lambda a, w: _notify(a, w, w.webhook_id, b"not json"),
    ("post", SOURCES, 400): lambda a, w: _create(a, w, SOURCES, {"name": "fed"}),
    ("post", SOURCES, 403): lambda a, w: _create(a, w, SOURCES, {"name": "x"}, signed=False),
    ("post", SOURCES, 422): lambda a, w: _create(a, w, SOURCES, {"name": ""}),
    ("post", FEED, 403): lambda a, w: a.post(f"/api/v2/sources/{w.source_id}/feed-source"),
    ("post", FEED, 404): lambda a, w: a.post(
        f"/api/v2/sources/{UNKNOWN_ID}/feed-source", headers=w.credentials, content=b"a\n1\n"
    ),
    ("post", FEED, 413): lambda a, w: _announce_a_huge_body(a, w),
    ("post", FEED, 415): lambda a, w: _feed(a, w, {"Content-Type": "application/xml"}, b"<a/>"),
    ("post", FEED, 422): lambda a, w: _feed(a, w, {"Content-Type": "text/csv"}, b""),
    ("get", FILES, 403): lambda a, w: a.get(f"/api/v2/sources/{w.source_id}/files"),
    ("get", FILES, 404): lambda a, w: a.get(
        f"/api/v2/sources/{UNKNOWN_ID}/files", headers=w.credentials
    ),
    ("get", FILES, 422): lambda a, w: _files(a, w, "", limit="0"),
    ("get", FILE, 403): lambda a, w: a.get(f"/api/v2/sources/{w.source_id}/files/1"),
    ("get", FILE, 404): lambda a, w: _files(a, w, f"/{UNKNOWN_ID}"),
    ("get", FILE, 422): lambda a, w: _files(a, w, "/one"),
    ("delete", FILE, 403): lambda a, w: a.delete(f"/api/v2/sources/{w.source_id}/files/1"),
    ("delete", FILE, 404): lambda a, w: a.delete(
        f"/api/v2/sources/{w.source_id}/files/{UNKNOWN_ID}", headers=w.credentials
    ),
    ("delete", FILE, 409): _retract_a_queued_file,
    ("get", ATTEMPTS, 403): lambda a, w: a.get(f"/api/v2/sources/{w.source_id}/files/1/attempts"),
    ("get", ATTEMPTS, 404): lambda a, w: _files(a, w, f"/{UNKNOWN_ID}/attempts"),
    ("get", ATTEMPTS, 422): lambda a, w: _files(a, w, "/one/attempts"),
    ("delete", FILE, 422): lambda a, w: a.delete(
        f"/api/v2/sources/{w.source_id}/files/one", headers=w.credentials
    ),
    ("post", RECS, 400): lambda a, w: _create(a, w, RECS, definition(w.pair, name="bank")),
    ("post", RECS, 403): lambda a, w: _create(a, w, RECS, {}, signed=False),
    ("post", RECS, 422): lambda a, w: _create(a, w, RECS, {"name": 3}),
    ("get", RECS, 403): lambda a, w: a.get(RECS),
    ("get", RESOURCES, 403): lambda a, w: a.get(RESOURCES),
    ("get", SOURCE, 403): lambda a, w: a.get(f"{SOURCES}/{w.source_id}"),
    ("get", SOURCE, 404): lambda a, w: a.get(f"{SOURCES}/{UNKNOWN_ID}", headers=w.credentials),
    ("get", SOURCE, 422): lambda a, w: a.get(f"{SOURCES}/one", headers=w.credentials),
    ("post", ROTATE, 403): lambda a, w: a.post(f"{SOURCES}/{w.source_id}/webhook/rotate"),
    ("post", ROTATE, 404): lambda a, w: a.post(  # a source fed by uploads has no webhook
        f"{SOURCES}/{w.resource_id}/webhook/rotate", headers=w.credentials
    ),
    ("post", ROTATE, 422): lambda a, w: a.post(
        f"{SOURCES}/one/webhook/rotate", headers=w.credentials
    ),
    ("get", DELIVERIES, 403): lambda a, w: a.get(f"{SOURCES}/{w.source_id}/callback-deliveries"),
    ("get", DELIVERIES, 404): lambda a, w: a.get(
        f"{SOURCES}/{UNKNOWN_ID}/callback-deliveries", headers=w.credentials
    ),
    ("get", DELIVERIES, 422): lambda a, w: a.get(
        f"{SOURCES}/{w.source_id}/callback-deliveries", headers=w.credentials, params={"limit": "0"}
    ),
    ("post", RETRY, 403): lambda a, w: a.post(
        f"{SOURCES}/{w.source_id}/callback-deliveries/1/retry"
    ),
    ("post", RETRY, 404): lambda a, w: a.post(
        f"{SOURCES}/{w.source_id}/callback-deliveries/{UNKNOWN_ID}/retry", headers=w.credentials
    ),
    ("post", RETRY, 422): lambda a, w: a.post(
        f"{SOURCES}/{w.source_id}/callback-deliveries/one/retry", headers=w.credentials
    ),
    ("get", RESOURCES, 422): lambda a, w: a.get(
        RESOURCES, headers=w.credentials, params={"after": "-1"}
    ),
    ("get", RECS, 422): lambda a, w: a.get(RECS, headers=w.credentials, params={"limit": "0"}),
    ("get", REC, 403): lambda a, w: a.get(f"{RECS}/{w.reconciliation_id}"),
    ("get", REC, 404): lambda a, w: a.get(f"{RECS}/{UNKNOWN_ID}", headers=w.credentials),
    ("get", REC, 422): lambda a, w: a.get(f"{RECS}/one", headers=w.credentials),
    ("put", REC, 400): lambda a, w: _rec(a, w, "PUT", json=definition(w.pair, name="ledger")),
    ("put", REC, 403): lambda a, w: a.put(f"{RECS}/{w.reconciliation_id}", json={}),
    ("put", REC, 404): lambda a, w: a.put(
        f"{RECS}/{UNKNOWN_ID}", headers=w.credentials, json=definition(w.pair)
    ),
    ("put", REC, 422): lambda a, w: _rec(a, w, "PUT", json={"name": "x"}),
    ("delete", REC, 403): lambda a, w: a.delete(f"{RECS}/{w.reconciliation_id}"),
    ("delete", REC, 404): lambda a, w: a.delete(f"{RECS}/{UNKNOWN_ID}", headers=w.credentials),
    ("delete", REC, 409): _read_by_another,
    ("delete", REC, 422): lambda a, w: a.delete(f"{RECS}/one", headers=w.credentials),
    ("get", RUNS, 403): lambda a, w: a.get(f"{RECS}/{w.reconciliation_id}/runs"),
    ("get", RUNS, 404): lambda a, w: a.get(f"{RECS}/{UNKNOWN_ID}/runs", headers=w.credentials),
    ("get", RUNS, 422): lambda a, w: a.get(f"{RECS}/one/runs", headers=w.credentials),
    ("post", RUNS, 403): lambda a, w: a.post(f"{RECS}/{w.reconciliation_id}/runs"),
    ("post", RUNS, 404): lambda a, w: a.post(f"{RECS}/{UNKNOWN_ID}/runs", headers=w.credentials),
    ("post", RUNS, 422): lambda a, w: a.post(f"{RECS}/one/runs", headers=w.credentials),
    ("post", MATCHES, 403): lambda a, w: a.post(f"{RECS}/{w.reconciliation_id}/matches"),
    ("post", MATCHES, 404): lambda a, w: a.post(
        f"{RECS}/{UNKNOWN_ID}/matches",
        headers=w.credentials,
        json={"left_rows": [1], "right_rows": [1]},
    ),
    ("post", MATCHES, 400): lambda a, w: _rec(
        a, w, "POST", "/matches", json={"left_rows": [99], "right_rows": [1]}
    ),
    ("post", MATCHES, 409): lambda a, w: [
        _rec(a, w, "POST", "/matches", json={"left_rows": [2], "right_rows": [2]}) for _ in range(2)
    ][-1],
    ("post", MATCHES, 422): lambda a, w: _rec(a, w, "POST", "/matches", json={"left_rows": []}),
    ("post", CONFIRM, 403): lambda a, w: a.post(f"{RECS}/{w.reconciliation_id}/matches/1/confirm"),
    ("post", CONFIRM, 404): lambda a, w: _rec(a, w, "POST", "/matches/7/confirm"),
    ("post", CONFIRM, 409): lambda a, w: _rec(a, w, "POST", "/matches/1/confirm"),
    ("post", CONFIRM, 422): lambda a, w: _rec(a, w, "POST", "/matches/one/confirm"),
    ("delete", MATCH, 403): lambda a, w: a.delete(f"{RECS}/{w.reconciliation_id}/matches/1"),
    ("delete", MATCH, 404): lambda a, w: _rec(a, w, "DELETE", "/matches/7"),
    ("delete", MATCH, 422): lambda a, w: _rec(a, w, "DELETE", "/matches/one"),
    ("post", RESOLUTIONS, 400): lambda a, w: _rec(
        a, w, "POST", "/resolutions", json={"side": "left", "rows": [99], "reason": "timing"}
    ),
    ("post", RESOLUTIONS, 403): lambda a, w: a.post(f"{RECS}/{w.reconciliation_id}/resolutions"),
    ("post", RESOLUTIONS, 404): lambda a, w: a.post(
        f"{RECS}/{UNKNOWN_ID}/resolutions",
        headers=w.credentials,
        json={"side": "left", "rows": [1], "reason": "timing"},
    ),
    ("post", RESOLUTIONS, 409): lambda a, w: _rec(
        a, w, "POST", "/resolutions", json={"side": "left", "rows": [1], "reason": "timing"}
    ),
    ("post", RESOLUTIONS, 422): lambda a, w: _rec(
        a, w, "POST", "/resolutions", json={"side": "left", "rows": [1], "reason": "lost"}
    ),
    ("delete", RESOLUTION, 403): lambda a, w: a.delete(
        f"{RECS}/{w.reconciliation_id}/resolutions/1"
    ),
    ("delete", RESOLUTION, 404): lambda a, w: _rec(a, w, "DELETE", "/resolutions/7"),
    ("delete", RESOLUTION, 422): lambda a, w: _rec(a, w, "DELETE", "/resolutions/one"),
    ("get", CANDIDATES, 400): lambda a, w: _rec(a, w, "GET", "/rows/left/99/candidates"),
    ("get", CANDIDATES, 403): lambda a, w: a.get(
        f"{RECS}/{w.reconciliation_id}/rows/left/1/candidates"
    ),
    ("get", CANDIDATES, 404): lambda a, w: a.get(
        f"{RECS}/{UNKNOWN_ID}/rows/left/1/candidates", headers=w.credentials
    ),
    ("get", CANDIDATES, 409): lambda a, w: _rec(a, w, "GET", "/rows/left/3/candidates"),
    ("get", CANDIDATES, 422): lambda a, w: _rec(a, w, "GET", "/rows/top/1/candidates"),
    ("get", ACTIONS, 403): lambda a, w: a.get(f"{RECS}/{w.reconciliation_id}/actions"),
    ("get", ACTIONS, 404): lambda a, w: a.get(
        f"{RECS}/{UNKNOWN_ID}/actions", headers=w.credentials
    ),
    ("get", ACTIONS, 422): lambda a, w: a.get(f"{RECS}/one/actions", headers=w.credentials),
    ("post", TRS, 400): lambda a, w: _create(a, w, TRS, _transformation(w, "x", "SELECT 1")),
    ("post", TRS, 403): lambda a, w: _create(a, w, TRS, {}, signed=False),
    ("post", TRS, 422): lambda a, w: _create(a, w, TRS, {"name": 3}),
    ("post", PREVIEW, 400): _preview_too_long,
    ("post", PREVIEW, 403): lambda a, w: _create(a, w, PREVIEW, {}, signed=False),
    ("post", PREVIEW, 422): lambda a, w: _create(a, w, PREVIEW, {"sql": []}),
    ("get", TRS, 403): lambda a, w: a.get(TRS),
    ("get", TRS, 422): lambda a, w: a.get(TRS, headers=w.credentials, params={"limit": "0"}),
    ("get", TR, 403): lambda a, w: a.get(f"{TRS}/{w.transformation_id}"),
    ("get", TR, 404): lambda a, w: a.get(f"{TRS}/{UNKNOWN_ID}", headers=w.credentials),
    ("get", TR, 422): lambda a, w: a.get(f"{TRS}/one", headers=w.credentials),
    ("put", TR, 400): lambda a, w: _tr(a, w, "PUT", json=_transformation(w, "ledger")),
    ("put", TR, 403): lambda a, w: a.put(f"{TRS}/{w.transformation_id}", json={}),
    ("put", TR, 404): lambda a, w: a.put(
        f"{TRS}/{UNKNOWN_ID}", headers=w.credentials, json=_transformation(w, "y")
    ),
    ("put", TR, 422): lambda a, w: _tr(a, w, "PUT", json={"name": "x"}),
    ("get", TR_RUNS, 403): lambda a, w: a.get(f"{TRS}/{w.transformation_id}/runs"),
    ("get", TR_RUNS, 404): lambda a, w: a.get(f"{TRS}/{UNKNOWN_ID}/runs", headers=w.credentials),
    ("get", TR_RUNS, 422): lambda a, w: a.get(f"{TRS}/one/runs", headers=w.credentials),
    ("delete", TR, 403): lambda a, w: a.delete(f"{TRS}/{w.transformation_id}"),
    ("delete", TR, 404): lambda a, w: a.delete(f"{TRS}/{UNKNOWN_ID}", headers=w.credentials),
    ("delete", TR, 409): _transformation_read_by_another,
    ("delete", TR, 422): lambda a, w: a.delete(f"{TRS}/one", headers=w.credentials),
}
# These change the database for good: run after every other request, in this order.
DESTRUCTIVE: dict[tuple[str, str, int], Callable[[httpx.Client, World, Runtime], Any]] = {
    ("post", WEBHOOKS, 500): _crashes,
    ("post", SOURCES, 502): lambda a, w, r: _provision_fails(a, w, r, SOURCES),
    ("post", WEBHOOKS, 502): lambda a, w, r: _provision_fails(a, w, r, WEBHOOKS),
    ("post", RECS, 502): lambda a, w, r: _provision_fails(a, w, r, RECS),
    ("post", TRS, 502): lambda a, w, r: _provision_fails(a, w, r, TRS),
}


@pytest.fixture
def world(runtime: Runtime, api: httpx.Client) -> World:
    tenant = make_tenant(runtime.engine, ingestion=True)
    other = make_tenant(runtime.engine)
    resource = make_source(runtime.engine, tenant, "id,amount\n1,10.00\n")
    foreign = make_source(runtime.engine, other, "id,amount\n1,10.00\n")
    pair = make_pair(runtime.engine, tenant)
    world = World(tenant, resource.id, foreign.id, 0, "", pair, 0)
    hook = _create(api, world, WEBHOOKS, {"name": "fed", "webhook": {}})
    assert hook.status_code == 201, hook.text
    created = hook.json()
    reconciliation = _create(api, world, RECS, definition(pair))
    assert reconciliation.status_code == 201, reconciliation.text
    output = reconciliation.json()["resource_id"]
    row = {"match_id": 1, "status": "matched", "bank._row": 1, "ledger._row": 1}
    write_output(runtime.engine, output, [row])
    transformation = _create(api, world, TRS, _transformation(world, "bank copy"))
    assert transformation.status_code == 201, transformation.text
    return World(
        tenant,
        resource.id,
        foreign.id,
        created["id"],
        created["webhook_id"],
        pair,
        reconciliation.json()["id"],
        transformation.json()["id"],
    )


def documented_errors(document: dict[str, Any]) -> dict[tuple[str, str, int], dict[str, Any]]:
    """(method, path, status) -> the documented JSON schema of each error answer."""
    found = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if int(status) >= 400:
                    schema = response["content"]["application/json"]["schema"]
                    found[(method, path, int(status))] = schema
    return found


def test_every_documented_error_is_answered_as_documented(
    api: httpx.Client, runtime: Runtime, world: World
) -> None:
    document = api.get("/api/v1/openapi.json").json()
    documented = documented_errors(document)
    provokers = {**PROVOKERS, **{k: _with_runtime(v, runtime) for k, v in DESTRUCTIVE.items()}}
    assert set(documented) == set(provokers) | set(PROVOKED_ELSEWHERE)
    wrong = {}
    for key, provoke in provokers.items():  # DESTRUCTIVE last: dicts keep their order
        response = provoke(api, world)
        schema = {**documented[key], "components": document["components"]}
        problems = [
            str(e) for e in jsonschema_rs.validator_for(schema).iter_errors(_json(response))
        ]
        if response.status_code != key[2] or problems:
            wrong[key] = (response.status_code, response.text[:300], problems)
    assert wrong == {}


def _with_runtime(provoke: Callable[[httpx.Client, World, Runtime], Any], runtime: Runtime) -> Any:
    return lambda api, world: provoke(api, world, runtime)


def _json(response: httpx.Response) -> Any:
    assert response.headers["content-type"] == "application/json", response.headers
    return response.json()


def _error_classes() -> list[type[errors.TallyError]]:
    found: list[type[errors.TallyError]] = []
    pending: list[type[errors.TallyError]] = [errors.TallyError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return sorted(set(found), key=lambda c: c.__name__)


@pytest.mark.parametrize("error_class", _error_classes(), ids=lambda c: c.__name__)
def test_every_error_class_has_a_status_in_an_api(error_class: type[errors.TallyError]) -> None:
    statuses = {row_for(error_class, table).status for table in (V1_ERRORS, V2_ERRORS)}
    if error_class in NOT_ANSWERED_BY_ANY_ROUTE:
        assert statuses == {500}
    else:
        assert statuses != {500}, f"{error_class.__name__} is in neither API's error table"


def test_request_validation_has_a_row_in_both_tables() -> None:
    assert row_for(RequestValidationError, V1_ERRORS).status == 422
    assert row_for(RequestValidationError, V2_ERRORS).status == 422


def test_a_route_cannot_document_an_error_without_a_row() -> None:
    from tally.api.errors import v2_responses

    with pytest.raises(ValueError, match="FetchError"):
        v2_responses(errors.FetchError)


@pytest.mark.parametrize("missing", ["x-api-key", "x-svc-workspace", "x-svc-account"])
def test_a_missing_credential_header_is_the_uniform_403(
    api: httpx.Client, world: World, missing: str
) -> None:
    """Required in the document, but the same 403 as a wrong value (spec part 5), even
    beside a parameter that fails validation: never a 422 naming what is missing."""
    headers = {name: value for name, value in world.credentials.items() if name != missing}
    url = f"/api/v2/sources/{world.source_id}/files"
    for params in ({}, {"limit": "0"}):
        response = api.get(url, headers=headers, params=params)
        assert response.status_code == 403
        assert response.json() == {"errors": [{"field": None, "message": "Forbidden"}]}
