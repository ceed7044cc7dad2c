"""A file's `finished_at` is when it became final (issue #14, point 4c), on both backends.

A delivered file's rows, its final status and its events commit together, so its
`finished_at` cannot be earlier than the end of its load, which the load itself records
as its source's `updated_at`. No duration is asserted: only the order of two recorded
times, which holds however fast or slow the machine is.
"""

from __future__ import annotations

import datetime as dt

import httpx
import sqlalchemy as sa

from support.factories import Tenant, run_pipeline
from tally.runtime import Runtime
from tally.storage.schema import outbox_events, resources

ROWS = 20_000  # a load long enough that a time taken before it is visibly earlier


def utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(dt.UTC)


def as_utc(value: dt.datetime) -> dt.datetime:
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def test_a_delivered_file_finished_no_earlier_than_its_load_ended(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    created = api.post(
        "/api/v2/sources", json={"name": "ledger"}, headers=ingestion_tenant.v2_headers
    )
    assert created.status_code == 201, created.text
    source_id = created.json()["id"]
    content = "id,amount,memo\n" + "".join(f"{i},{i}.25,row {i}\n" for i in range(ROWS))
    uploaded = api.post(
        f"/api/v2/sources/{source_id}/feed-source",
        content=content.encode(),
        headers={**ingestion_tenant.v2_headers, "content-type": "text/csv"},
    )
    assert uploaded.status_code == 202, uploaded.text
    file_id = uploaded.json()["file_id"]
    run_pipeline(runtime)
    file = api.get(
        f"/api/v2/sources/{source_id}/files/{file_id}", headers=ingestion_tenant.v2_headers
    )
    assert file.json()["status"] == "delivered", file.text
    finished_at = utc(file.json()["finished_at"])
    with runtime.engine.connect() as conn:
        source = conn.execute(
            sa.select(resources.c.updated_at, resources.c.row_count).where(
                resources.c.id == source_id
            )
        ).one()
        events = conn.execute(
            sa.select(outbox_events.c.type, outbox_events.c.created_at).where(
                outbox_events.c.file_id == file_id, outbox_events.c.type == "file.delivered"
            )
        ).all()
    load_ended = as_utc(source.updated_at)  # recorded by the load, as it ends
    assert source.row_count == ROWS
    assert finished_at >= load_ended, (finished_at, load_ended)
    assert utc(file.json()["updated_at"]) == finished_at
    assert events  # the events of the final state carry its time too
    assert all(as_utc(created_at) >= load_ended for _type, created_at in events)
