"""Schemathesis hooks for tests/api/test_schemathesis.py (loaded by the schemathesis
process through SCHEMATHESIS_HOOKS).

Two rules no JSON Schema can state, kept out of the generated cases:

- POST /api/v2/sources refuses (422) two columns of one name. JSON Schema cannot say
  "unique by `name`" (`uniqueItems` compares whole objects); positive cases that break
  it are not generated. The 422 is tested in tests/api/test_sources_api.py.
- JSON rows are converted to CSV by rules (json_rows.RULES, in the operation's
  description) that apply at every depth: no empty key, no two keys flattening to one
  column, a column at least, ... The schema states what it can without recursion; the
  positive cases the converter itself refuses are not generated.
- A feed carrying an Idempotency-Key already used is answered with the file that key
  queued, before the body is read (a retry is not refused for its body). Negative cases
  that carry a valid key are not generated: the body they negate is never read.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import schemathesis

from tally.core.errors import JsonRowsError
from tally.services.json_rows import json_to_csv

FEEDS = ("/api/v2/sources/{source_id}/feed-source", "/api/v2/webhooks/{webhook_id}/feed-source")
IDEMPOTENCY_KEY_MAX_CHARS = 200


@schemathesis.hook
def filter_case(context: schemathesis.HookContext, case: schemathesis.Case) -> bool:
    if case.meta is None:
        return True
    if case.meta.generation.mode.is_positive and (case.method, case.path) == (
        "POST",
        "/api/v2/sources",
    ):
        return _column_names_are_unique(case.body)
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
