"""The console's text search (`RowsRequest.contains`, the Exceptions view's reference
filter) answers what plain Python answers: a row is found when its text, lowered, holds
the typed text, lowered (`str.lower`, Unicode's case mapping) as it is, `%`, `_`, `\\`
and quotes included; with the Data API's own filters beside it; counted and paged
alike. Both backends, with filtered reads answered by SQL alone and with column
snapshots built (which must never answer a text search)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from support.databases import make_settings
from support.factories import make_source, make_tenant
from tally.runtime import Runtime, build_runtime
from tally.services.workspace_rows import RowsRequest
from tally.storage.resources import Resource

# Letters whose lowering is one-to-one and context-free in Python and in ICU alike
# (not the Turkish dotted I, not the Greek sigma, whose final form depends on what
# follows), LIKE's wildcards, its escape character, quotes and spaces.
ALPHABET = "aAbBzZ09 -%_\\'\"üÜéÉßøØçÇ"
LAYOUT = {"columns": [{"name": "id", "type": "integer"}, {"name": "ref", "type": "text"}]}


@pytest.fixture(params=["sql", "snapshots"])
def runtime(request: pytest.FixtureRequest, backend: str, tmp_path: Any) -> Iterator[Runtime]:
    overrides = {"snapshot_min_rows": 0} if request.param == "snapshots" else {}
    built = build_runtime(make_settings(request, backend, tmp_path / "home", **overrides))
    yield built
    built.close()


def _csv(refs: list[str]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["id", "ref"])
    writer.writerows([n, ref] for n, ref in enumerate(refs, 1))
    return out.getvalue()


def _read(
    runtime: Runtime,
    resource: Resource,
    *,
    contains: tuple[str, str] | None = None,
    filters: list[tuple[str, str]] | None = None,
    ordering: str | None = None,
    page: int = 1,
    page_size: int = 10000,
) -> tuple[list[dict[str, Any]], int]:
    found = runtime.data_query.read_rows(
        RowsRequest(
            resource_id=resource.id,
            workspace_id=resource.workspace_id,
            filters=filters or [],
            fields=None,
            ordering=ordering,
            page=page,
            page_size=page_size,
            contains=contains,
        )
    )
    return [json.loads(row) for row in found.rows], found.total


@st.composite
def needles(draw: st.DrawFn, refs: list[str]) -> str:
    """Any short text, or a piece of a stored one in another case (a hit)."""
    pieces = [r[i : i + n] for r in refs for i in range(len(r)) for n in (1, 2, 3)]
    if pieces and draw(st.booleans()):
        piece = draw(st.sampled_from(pieces))
        return draw(st.sampled_from([piece, piece.upper(), piece.lower(), piece.swapcase()]))
    return draw(st.text(alphabet=ALPHABET, min_size=1, max_size=3))


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    refs=st.lists(st.text(alphabet=ALPHABET, max_size=8), min_size=1, max_size=12), data=st.data()
)
def test_contains_answers_what_python_answers(
    runtime: Runtime, refs: list[str], data: st.DataObject
) -> None:
    tenant = make_tenant(runtime.engine)
    resource = make_source(runtime.engine, tenant, _csv(refs), declared=LAYOUT)
    snapshots = runtime.data_query.snapshots
    if snapshots is not None and snapshots.enabled:
        snapshots.find(resource)
        snapshots.wait()
    stored, _ = _read(runtime, resource)  # the values as loaded (an empty one is missing)
    needle = data.draw(needles([r["ref"] for r in stored if r["ref"]]))
    least = data.draw(st.integers(1, len(refs)))
    ordering = data.draw(st.sampled_from([None, "-id"]))
    note(f"needle={needle!r} id>={least} ordering={ordering}")
    expected = [
        r
        for r in stored
        if r["ref"] is not None and needle.lower() in r["ref"].lower() and r["id"] >= least
    ]
    if ordering == "-id":
        expected.reverse()
    page_size = data.draw(st.integers(1, 4))
    seen: list[dict[str, Any]] = []
    for page in range(1, len(expected) // page_size + 2):
        rows, total = _read(
            runtime,
            resource,
            contains=("ref", needle),
            filters=[("id__gte", str(least))],
            ordering=ordering,
            page=page,
            page_size=page_size,
        )
        assert total == len(expected)
        seen += rows
    assert seen == expected


def test_a_column_that_is_not_text_is_compared_equal_to(runtime: Runtime) -> None:
    tenant = make_tenant(runtime.engine)
    resource = make_source(runtime.engine, tenant, _csv(["a", "b", "c"] * 4), declared=LAYOUT)
    rows, total = _read(runtime, resource, contains=("id", "1"))
    assert (total, [r["id"] for r in rows]) == (1, [1])  # not 10, 11, 12
    assert _read(runtime, resource, contains=("id", "+1"))[1] == 1  # read as an integer


@pytest.mark.parametrize("needle", ["müller", "MÜLLER", "Müller", "mÜLLER"])
def test_non_ascii_letters_match_in_any_case_on_both_backends(
    runtime: Runtime, needle: str
) -> None:
    tenant = make_tenant(runtime.engine)
    refs = ["Müller GmbH", "MÜLLER AG", "Mueller", "müller", "ÉLECTRICITÉ", "50%_off", "50x_off"]
    resource = make_source(runtime.engine, tenant, _csv(refs), declared=LAYOUT)
    rows, total = _read(runtime, resource, contains=("ref", needle))
    assert (total, [r["id"] for r in rows]) == (3, [1, 2, 4])
    assert [r["id"] for r in _read(runtime, resource, contains=("ref", "électricité"))[0]] == [5]
    assert [r["id"] for r in _read(runtime, resource, contains=("ref", "%_"))[0]] == [6]


def test_a_search_and_an_equal_to_of_the_same_text_are_counted_apart(runtime: Runtime) -> None:
    tenant = make_tenant(runtime.engine)
    resource = make_source(runtime.engine, tenant, _csv(["b", "ab", "B", "c"]), declared=LAYOUT)
    assert _read(runtime, resource, contains=("ref", "b"))[1] == 3
    assert _read(runtime, resource, filters=[("ref", "b")])[1] == 1  # the Data API's =
    assert _read(runtime, resource, contains=("ref", "b"))[1] == 3
