"""Schemathesis hooks for tests/api/test_schemathesis.py (loaded by the schemathesis
process through SCHEMATHESIS_HOOKS).

Two rules no JSON Schema can state, kept out of the generated cases:

- POST /api/v2/sources and POST /api/v2/webhooks refuse (422) two columns of one name.
  JSON Schema cannot say "unique by `name`" (`uniqueItems` compares whole objects);
  positive cases that break it are not generated. The 422 is tested in
  tests/api/test_sources_api.py and tests/api/test_column_formats_api.py. Likewise a
  date format outside its token grammar, or a column's two separators alike (the schema
  states which options fit which type, and a format's length; the grammar and the
  comparison are the model's, tests/api/test_column_formats_api.py).
- JSON rows are converted to CSV by rules (json_rows.RULES, in the operation's
  description) that apply at every depth: no empty key, no two keys flattening to one
  column, a column at least, ... The schema states what it can without recursion; the
  positive cases the converter itself refuses are not generated.
- An Idempotency-Key names one request: sent again with another body, a feed is
  refused (422, tested in tests/api/test_webhooks_api.py and test_sources_api.py). A
  positive case's key is made its own (a case number appended); negative cases that
  carry a valid key are not generated.

And one map: a positive reconciliation definition (POST /api/v2/reconciliations, PUT
/api/v2/reconciliations/{id}) names resources and columns no schema can know; one in
two is pointed at the run's bank and ledger (TALLY_SCHEMATHESIS_PAIR) and their columns,
its names made unique, so that it creates (or replaces) a reconciliation. The others
keep what was generated: their 400s are the rules of data the test expects. Likewise a
positive transformation definition (POST /api/v2/transformations and .../preview, PUT
/api/v2/transformations/{id}): one in two reads the bank as `s` with a SELECT that
checks, its name made unique.
"""

from __future__ import annotations

import itertools
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import schemathesis
from pydantic import ValidationError

from tally.core.errors import JsonRowsError
from tally.core.source_bodies import ColumnBody
from tally.services.json_rows import json_to_csv

RECONCILIATIONS = ("/api/v2/reconciliations", "/api/v2/reconciliations/{reconciliation_id}")
TRANSFORMATIONS = (
    "/api/v2/transformations",
    "/api/v2/transformations/preview",
    "/api/v2/transformations/{transformation_id}",
)
PAIR_VARIABLE = "TALLY_SCHEMATHESIS_PAIR"  # set by tests/api/test_schemathesis.py
_cases = itertools.count(1)
FEEDS = ("/api/v2/sources/{source_id}/feed-source", "/api/v2/webhooks/{webhook_id}/feed-source")
IDEMPOTENCY_KEY_MAX_CHARS = 200


@schemathesis.hook
def filter_case(context: schemathesis.HookContext, case: schemathesis.Case) -> bool:
    if case.meta is None:
        return True
    if case.meta.generation.mode.is_positive and (case.method, case.path) in (
        ("POST", "/api/v2/sources"),
        ("POST", "/api/v2/webhooks"),
    ):
        return _column_names_are_unique(case.body) and _formats_parse(case.body)
    if case.meta.generation.mode.is_positive and case.path == FEEDS[0]:
        return case.media_type != "application/json" or _rows_convert(case.body)
    if case.meta.generation.mode.is_negative and case.path in FEEDS:
        return not _carries_a_valid_key(case.headers or {})
    return True


def _rows_convert(body: Any) -> bool:
    """Whether the converter takes the rows (the 422s it gives are tested in
    tests/unit/test_json_rows.py)."""
    with tempfile.TemporaryDirectory() as spill:
        try:
            with json_to_csv([json.dumps(body).encode()], spill_dir=Path(spill)) as csv:
                for _ in csv:
                    pass
        except JsonRowsError:
            return False
    return True


def _carries_a_valid_key(headers: dict[str, Any]) -> bool:
    key = next((v for k, v in headers.items() if k.lower() == "idempotency-key"), None)
    return isinstance(key, str) and len(key) <= IDEMPOTENCY_KEY_MAX_CHARS


def _column_names_are_unique(body: Any) -> bool:
    columns = body.get("columns") if isinstance(body, dict) else None
    if not isinstance(columns, list):
        return True
    names = [column.get("name") for column in columns if isinstance(column, dict)]
    return len(names) == len(set(names))


def _formats_parse(body: Any) -> bool:
    """Every column's date format in the grammar, its separators apart (core/formats.py:
    rules of a string's content and of one field's value against another's)."""
    columns = body.get("columns") if isinstance(body, dict) else None
    if not isinstance(columns, list):
        return True
    try:
        for column in columns:
            ColumnBody.model_validate(column)
    except ValidationError:
        return False
    return True


@schemathesis.hook
def map_case(context: schemathesis.HookContext, case: schemathesis.Case) -> schemathesis.Case:
    if (
        case.meta is not None
        and case.meta.generation.mode.is_positive
        and case.path in FEEDS
        and _carries_a_valid_key(case.headers or {})
    ):
        assert case.headers is not None
        for name, key in list(case.headers.items()):
            if name.lower() == "idempotency-key":
                case.headers[name] = f"{key[: IDEMPOTENCY_KEY_MAX_CHARS - 12]}#{next(_cases)}"
    if (
        case.meta is not None
        and case.meta.generation.mode.is_positive
        and case.method in ("POST", "PUT")
        and case.path in RECONCILIATIONS
        and isinstance(case.body, dict)
        and next(_cases) % 2 == 0
    ):
        case.body = _on_the_pair(case.body, json.loads(os.environ[PAIR_VARIABLE]))
    elif (
        case.meta is not None
        and case.meta.generation.mode.is_positive
        and case.method in ("POST", "PUT")
        and case.path in TRANSFORMATIONS
        and isinstance(case.body, dict)
        and next(_cases) % 2 == 0
    ):
        bank = json.loads(os.environ[PAIR_VARIABLE])["bank"]
        case.body["name"] = f"{case.body['name'][:150]} #{next(_cases)}"
        case.body["inputs"] = {"s": bank}
        case.body["sql"] = "SELECT s.reference, s.amount * 2 AS twice FROM s"
    return case


def _on_the_pair(body: dict[str, Any], pair: dict[str, int]) -> dict[str, Any]:
    """The definition on the bank (left) and the ledger (right), keeping what it says of
    amounts, dates, types, normalisers and windows where the pair allows it."""
    left, right = body["left"], body["right"]
    amounts = bool(left.get("amount") or right.get("amount"))
    dates = bool(left.get("date") or right.get("date"))
    for side, name, resource_id in (
        (left, "bank", pair["bank"]),
        (right, "ledger", pair["ledger"]),
    ):
        side.update(name=name, resource_id=resource_id)
        side.update(amount="amount" if amounts else None, date="txn_date" if dates else None)
        side.pop("currency", None)  # (the pair has no currency column)
    body["name"] = f"{body['name'][:150]} #{next(_cases)}"
    for index, match_pass in enumerate(body["passes"]):
        match_pass["name"] = f"{match_pass['name'][:150]} #{index}"
        for key in match_pass.get("keys", []):
            key.update(left="reference", right="reference")
        if match_pass["type"] != "one_to_one" and not match_pass.get("keys"):
            match_pass["keys"] = [{"left": "reference", "right": "reference"}]
        if not amounts:
            match_pass.pop("amount_tolerance", None)
        window = match_pass.get("date_window")
        if window is not None:
            match_pass["date_window"] = sorted(window) if dates else [0, 0]
    return body
