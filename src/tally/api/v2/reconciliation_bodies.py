"""Request and response models of the reconciliation API (api/v2/reconciliations.py;
a page of reconciliations is derived_routes.py's `page_model`); the definition's own
body is services/reconciliation/bodies.py, which the CLI reads too."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator

from tally.core.bodies import WHOLE_NUMBER, Strict
from tally.core.columns import INT64_MAX
from tally.services.reconciliation.bodies import ReconciliationDefinitionBody

MAX_ROWS_PER_SIDE = 10_000
NOTE_MAX_CHARS = 10_000
Row = Annotated[int, Field(ge=1, le=INT64_MAX), WHOLE_NUMBER]


class ReconciliationCreatedResponse(BaseModel):
    id: int = Field(description="The reconciliation's id.")
    name: str
    resource_id: int = Field(description="The output: read it at /api/v1/resources/{id}/data.")


class ReconciliationResponse(ReconciliationCreatedResponse):
    definition: ReconciliationDefinitionBody = Field(
        description="As stored: every default spelled out."
    )
    state: Literal["queued", "running", "idle", "failed"] = Field(
        description="`queued`: a run is due; `failed`: the last run failed for good "
        "(`error` says why; a new run is queued by a change or POST .../runs)."
    )
    error: str | None
    last_run: dict[str, Any] | None = Field(
        description="The last successful run: started_at, finished_at, inputs (each "
        "side's resource_id and data_version), counts (matched, matched_with_difference, "
        "suggested and manual per match; unmatched_left and unmatched_right per row) and "
        "amounts (each side's matched and unmatched totals, decimal strings: "
        '`{"left": {"matched", "unmatched"}, "right": {...}}`; where the sides name '
        'currencies, that per currency: `{"EUR": {"left": ..., "right": ...}, ...}`, '
        'the rows of an empty currency under `""`), absolute_amounts (the same shape, '
        "each row's amount without its sign: the base of the share reconciled by value), "
        'oldest_unmatched (per side `{"date", "rows"}`, the earliest date among its '
        "unmatched rows and how many have it; null without dates), mode, rows_examined "
        "and manual_work; null before the first run."
    )


class RunQueuedResponse(BaseModel):
    id: int
    state: Literal["queued", "running"] = Field(
        description="`running`: a run already under way; the queued one follows it."
    )


class MatchBody(Strict):
    left_rows: list[Row] = Field(
        min_length=1,
        max_length=MAX_ROWS_PER_SIDE,
        description="Positions of left rows (their `<left>._row`).",
        json_schema_extra={"uniqueItems": True},
    )
    right_rows: list[Row] = Field(
        min_length=1,
        max_length=MAX_ROWS_PER_SIDE,
        description="Positions of right rows (their `<right>._row`).",
        json_schema_extra={"uniqueItems": True},
    )
    note: str | None = Field(None, max_length=NOTE_MAX_CHARS, description="Why, for the audit.")

    @field_validator("left_rows", "right_rows")
    @classmethod
    def _unique(cls, rows: list[int]) -> list[int]:
        if len(set(rows)) != len(rows):
            twice = sorted({r for r in rows if rows.count(r) > 1})
            raise ValueError(f"rows given twice: {twice}")
        return rows


class NoteBody(Strict):
    """The optional body of a confirmation or an undo (none at all is no note)."""

    note: str | None = Field(None, max_length=NOTE_MAX_CHARS, description="Why, for the audit.")


class MatchResponse(BaseModel):
    match_id: int = Field(description="The match's id in the output: its smallest left row.")


class UndoneResponse(MatchResponse):
    outcome: Literal["dissolved", "rejected"] = Field(
        description="`dissolved`: a manual match undone; `rejected`: an automatic or "
        "suggested match undone, whose rows no later run pairs again."
    )


class ActionResponse(BaseModel):
    id: int
    kind: Literal["match", "confirm", "reject"]
    match_id: int
    left_rows: list[int]
    right_rows: list[int]
    fingerprint: str = Field(description="sha256 of the rows' content when it was taken.")
    note: str | None = Field(description="The note of the POST that took the action.")
    created_at: dt.datetime
    undone_at: dt.datetime | None
    undo_note: str | None = Field(
        description="The note of the DELETE that dissolved a manual match (a rejection "
        "is an action of its own, with its note)."
    )
    retired_reason: str | None = Field(
        description="Why the action stopped being in force though no analyst undid it: "
        "its rows were replaced by a snapshot or taken back with their file (`bank row 6 "
        "no longer in ledger: file 12 replaced its rows`), or carried to a new action at "
        "the rows' new positions (`carried to action 17: ...`), or a side reads another "
        "resource. Null otherwise."
    )
    carried_from: int | None = Field(
        description="The action this one continues: the same rows, found again at new "
        "positions after a snapshot or a file taken back. Null otherwise."
    )
    actor: str | None = Field(
        description="Who took the action: a console user's name, or `api key sha256:...` "
        "(the start of the key's SHA-256, as `tally admin list-keys` shows it); null for "
        "actions taken before tally kept it."
    )
    undo_actor: str | None = Field(description="Who dissolved the manual match; as `actor`.")


class ActionListResponse(BaseModel):
    data: list[ActionResponse]
