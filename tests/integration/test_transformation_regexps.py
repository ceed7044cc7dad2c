"""Regular expressions in transformations (issue #30): on SQLite they run on RE2 with
PostgreSQL's meaning, so no pattern runs away and both backends agree; what RE2 cannot
run is refused, naming the pattern, at the check when the pattern is a literal. The
time limit stops a query of them on many rows, and a query whose time is spent."""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from support.databases import BACKENDS, make_settings
from support.factories import Tenant, make_source, make_tenant
from support.transformations import preview as preview_of
from tally.core.errors import DefinitionRejectedError, RunFailedError
from tally.runtime import Runtime, build_runtime
from tally.storage.transformation_sql import fetch_query_rows, time_limit

ON_SQLITE = pytest.mark.parametrize("backend", [b for b in BACKENDS if b == "sqlite"])


def preview(runtime: Runtime, tenant: Tenant, source_id: int, sql: str) -> list[str]:
    body = {"name": "t", "inputs": {"t": source_id}, "sql": sql}
    return preview_of(runtime, workspace_id=tenant.workspace_id, body=body).rows


@pytest.mark.timeout(60)  # Python's `re` took hours a row on SQLite
def test_a_pattern_catastrophic_for_backtracking_finishes_on_both(
    runtime: Runtime, tenant: Tenant
) -> None:
    source = make_source(runtime.engine, tenant, "reference,n\nPO-1,1\nPO-2,2\nPO-3,3\n")
    rows = preview(
        runtime,
        tenant,
        source.id,
        "SELECT ('" + "a" * 40 + "!' || t.reference) ~ '^(a+)+$' AS x, "
        "t.reference !~ '^(a|aa)+$' AS y FROM t WHERE t.n <= 3 ORDER BY t.n",
    )
    assert rows == ['{"x":false,"y":true}'] * 3


def test_dot_newlines_and_replacements_mean_what_postgresql_means_on_both(
    runtime: Runtime, tenant: Tenant
) -> None:
    """`.` matches a newline; a replacement's `\\n` is a backslash and an n, `\\\\` one
    backslash, a group past the pattern's nothing (Python's `re` differed in each)."""
    source = make_source(runtime.engine, tenant, 's,n\n"a\nb",1\n')
    rows = preview(
        runtime,
        tenant,
        source.id,
        "SELECT t.s ~ '^a.b$' AS dot, regexp_substr(t.s, 'a.') AS sub, "
        "regexp_replace(t.s, '(a)', '[\\1\\2\\n\\\\]') AS r FROM t",
    )
    assert rows == ['{"dot":true,"sub":"a\\n","r":"[a\\\\n\\\\]\\nb"}']


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("(a)\\1", "invalid regular expression '(a)\\1': invalid escape sequence: \\1"),
        ("a(?=b)", "invalid regular expression 'a(?=b)': invalid perl operator: (?="),
    ],
)
def test_a_literal_pattern_re2_cannot_run_is_refused_at_the_check_on_both(
    runtime: Runtime, tenant: Tenant, pattern: str, message: str
) -> None:
    """PostgreSQL runs backreferences and lookaround, SQLite could not: neither takes them."""
    source = make_source(runtime.engine, tenant, "s\nab\n")
    sql = f"SELECT regexp_substr(t.s, '{pattern}') AS x FROM t"
    for use in (partial(preview_of, runtime), runtime.transformations.create):
        with pytest.raises(DefinitionRejectedError) as refused:
            use(
                workspace_id=tenant.workspace_id,
                body={"name": "t", "inputs": {"t": source.id}, "sql": sql},
            )
        [problem] = refused.value.problems
        assert problem.field == "sql"
        assert message in problem.message


@ON_SQLITE
def test_a_pattern_a_column_holds_that_re2_cannot_run_fails_naming_it_on_sqlite(
    runtime: Runtime, tenant: Tenant
) -> None:
    source = make_source(runtime.engine, tenant, "s,p\nab,a(?=b)\n")
    with pytest.raises(RunFailedError) as failed:
        preview(runtime, tenant, source.id, "SELECT t.s ~ t.p AS x FROM t")
    assert failed.value.message == (
        "the query failed: invalid regular expression 'a(?=b)': invalid perl operator: (?= "
        "(backreferences such as \\1 and lookaround such as (?= are not supported)"
    )


@pytest.fixture
def limited(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Iterator[Runtime]:
    settings = make_settings(request, backend, tmp_path / "home", **_LIMITS)
    runtime = build_runtime(settings)
    yield runtime
    runtime.close()


_LIMITS: dict[str, Any] = {"transformation_timeout_seconds": 0.5}


@pytest.mark.timeout(60)
def test_a_pattern_on_many_rows_is_stopped_at_the_time_limit_on_both(limited: Runtime) -> None:
    """10^8 rows each matched against a pattern: the query stops at the time limit (on
    SQLite Python's `re` never reached it: one call outlasted it 200 times)."""
    tenant = make_tenant(limited.engine)
    numbers = make_source(limited.engine, tenant, "n\n" + "".join(f"{n}\n" for n in range(100)))
    with pytest.raises(RunFailedError) as failed:
        preview(
            limited,
            tenant,
            numbers.id,
            "SELECT COUNT(*) AS c FROM t, t AS a, t AS b, t AS c "
            "WHERE ('" + "a" * 40 + "' || CAST(t.n + a.n + b.n + c.n AS TEXT)) "
            "~ '^(a+)+$'",
        )
    assert failed.value.message.startswith("the query ran longer than 0.5 s")


def test_a_query_whose_time_its_check_spent_does_not_start_on_both(runtime: Runtime) -> None:
    with runtime.engine.connect() as conn, conn.begin():
        with (
            pytest.raises(RunFailedError) as failed,
            time_limit(conn, 60, deadline=time.monotonic() - 1),
        ):
            fetch_query_rows(conn, "SELECT 1")
        assert failed.value.message.startswith("the query ran longer than 60 s")
        assert fetch_query_rows(conn, "SELECT 2") == [(2,)]  # the connection is as it was
