"""Response models of the transformation API (api/v2/transformations.py; a page of
transformations is derived_routes.py's `page_model`); the definition's own shape is
services/transformations/shape.py, which the CLI reads too."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from tally.api.v2.derived_routes import PHASES_DESCRIPTION, RUN_DESCRIPTION, RunUnderWayResponse
from tally.services.transformations.bodies import TransformationDefinitionBody


class ColumnResponse(BaseModel):
    name: str
    type: Literal["text", "integer", "decimal", "date", "timestamp", "boolean"]


class TransformationCreatedResponse(BaseModel):
    id: int = Field(description="The transformation's id.")
    name: str
    resource_id: int = Field(description="The output: read it at /api/v1/resources/{id}/data.")
    columns: list[ColumnResponse] = Field(description="The output's columns, in order.")


class TransformationResponse(TransformationCreatedResponse):
    definition: TransformationDefinitionBody
    state: Literal["queued", "running", "idle", "failed"] = Field(
        description="`queued`: a run is due; `failed`: the last run failed for good "
        "(`error` says why; a change to an input or a PUT queues a new one)."
    )
    error: str | None
    run: RunUnderWayResponse | None = Field(description=RUN_DESCRIPTION)
    last_run: dict[str, Any] | None = Field(
        description="The last successful run: started_at, finished_at, rows, incremental, "
        f"inputs (each input's resource_id and data_version) and {PHASES_DESCRIPTION}; "
        "null before the first."
    )


class PreviewResponse(BaseModel):
    columns: list[ColumnResponse]
    rows: list[dict[str, Any]] = Field(description="The first 20 rows, as a page shows them.")
