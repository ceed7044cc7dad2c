"""Request and response models of the reconciliation API (api/v2/reconciliations.py;
a page of reconciliations is derived_routes.py's `page_model`); the definition's own
body is services/reconciliation/bodies.py, which the CLI reads too."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator

from tally.api.v2.derived_routes import PHASES_DESCRIPTION, RUN_DESCRIPTION, RunUnderWayResponse
from tally.core.bodies import WHOLE_NUMBER, Strict
from tally.core.columns import INT64_MAX
from tally.core.reconciliation_actions import NOTE_MAX_CHARS
from tally.services.reconciliation.bodies import ReconciliationDefinitionBody

MAX_ROWS_PER_SIDE = 10_000
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
    run: RunUnderWayResponse | None = Field(description=RUN_DESCRIPTION)
    last_run: dict[str, Any] | None = Field(
        description="The last successful run: started_at, finished_at, inputs (each "
        "side's resource_id and data_version), counts (matched, matched_with_difference, "
        "suggested and manual per match; unmatched_left, unmatched_right, resolved_left "
        "and resolved_right per row) and amounts (each side's matched, unmatched and "
        "resolved totals, decimal strings, and matched_by_status: the matched total split "
        "by match status, matched, matched_with_difference, suggested and manual, summing "
        'to matched; absent for a run made before it was kept: `{"left": {"matched", '
        '"unmatched", "resolved", "matched_by_status": {...}}, "right": {...}}`; where the '
        "sides name "
        'currencies, that per currency: `{"EUR": {"left": ..., "right": ...}, ...}`, '
        'the rows of an empty currency under `""`), absolute_amounts (the same shape, '
        "each row's amount without its sign: the base of the share reconciled by value), "
        'oldest_unmatched (per side `{"date", "rows"}`, the earliest date among its '
        "unmatched rows and how many have it; null without dates), mode, rows_examined, "
        f"manual_work and {PHASES_DESCRIPTION}; null before the first run."
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
        return _each_once(rows)


def _each_once(rows: list[int]) -> list[int]:
    if len(set(rows)) != len(rows):
        twice = sorted({r for r in rows if rows.count(r) > 1})
        raise ValueError(f"rows given twice: {twice}")
    return rows


class ResolutionBody(Strict):
    side: Literal["left", "right"] = Field(description="The side whose rows are closed.")
    rows: list[Row] = Field(
        min_length=1,
        max_length=MAX_ROWS_PER_SIDE,
        description="Positions of the side's rows (their `<side>._row`), each unmatched.",
        json_schema_extra={"uniqueItems": True},
    )
    reason: str = Field(
        max_length=40,
        description="A code of the definition's `resolution_reasons` (default `bank_fee`, "
        "`timing`, `duplicate`, `write_off`); another is a 422 naming `reason`.",
    )
    note: str | None = Field(None, max_length=NOTE_MAX_CHARS, description="Why, for the audit.")

    @field_validator("rows")
    @classmethod
    def _unique(cls, rows: list[int]) -> list[int]:
        return _each_once(rows)


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


class ResolutionResponse(BaseModel):
    id: int = Field(description="The resolution's id (its action's): DELETE it to undo.")
    side: Literal["left", "right"]
    rows: list[int] = Field(description="The side's positions it closes.")
    reason: str = Field(description="Its reason code.")
    note: str | None
    actor: str | None = Field(description="Who resolved: as an action's `actor`.")
    created_at: dt.datetime
    undone_at: dt.datetime | None = Field(description="When it was undone (null: in force).")
    undo_note: str | None
    undo_actor: str | None


class ConditionResponse(BaseModel):
    condition: Literal["keys", "currency", "amount", "date", "not_rejected", "free"] = Field(
        description="`free`: the candidate is in no match (or resolution) of the output."
    )
    met: bool
    detail: str = Field(description="In words: `differs by 0.07, tolerance 0.05`.")
    difference: str | None = Field(
        None, description="amount: left minus right, exact decimal text."
    )
    tolerance: str | None = Field(None, description="amount: the pass's tolerance.")
    days: int | None = Field(
        None, description="date: the right date minus the left, in days (as the window)."
    )
    window: list[int] | None = Field(None, description="date: the pass's [before, after].")


class CandidateResponse(BaseModel):
    row: int = Field(description="The other side's position (`<side>._row`).")
    status: str = Field(description="Its status in the output.")
    match_id: int | None
    fits: bool = Field(description="Every condition met.")
    conditions: list[ConditionResponse]


class PassCandidatesResponse(BaseModel):
    name: str
    type: str
    candidates: list[CandidateResponse] = Field(
        description="At most 10, best first: fewest conditions failed, then the nearest "
        "amount, the nearest date, the lowest position."
    )


class CandidatesResponse(BaseModel):
    side: Literal["left", "right"]
    row: int
    status: str = Field(
        description="The row's status in the output (any: a matched row gets its candidates too)."
    )
    match_id: int | None
    passes: list[PassCandidatesResponse]


class ActionResponse(BaseModel):
    id: int
    kind: Literal["match", "confirm", "reject", "resolve", "define", "run"] = Field(
        description="`resolve`: rows of one side closed with no counterpart (its rows on "
        "that side, none on the other; `reason` its code). `define`: the definition "
        "replaced (PUT, or the console's Save); `run`: a run asked for (POST .../runs, or "
        "the console's Run now): events with no rows, never in force, never undone; "
        "their `fingerprint` is the sha256 of the definition they concern."
    )
    match_id: int | None = Field(
        description="The match's id; null for a resolution and for an event."
    )
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
    undo_actor: str | None = Field(
        description="Who dissolved the manual match or undid the resolution; as `actor`."
    )
    reason: str | None = Field(description="A resolution's reason code; null otherwise.")


class ActionListResponse(BaseModel):
    data: list[ActionResponse]
