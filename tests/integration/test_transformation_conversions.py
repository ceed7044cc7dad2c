"""Text converted in a transformation's SQL (issue #32 point 2), on both backends: CAST
of text to decimal, integer and date, TRY_CAST, `to_date` with a format and
`parse_decimal` with separators give the same values; a value that does not fit fails
the run and the preview naming the value and where it is, or is NULL under TRY_CAST;
CURRENT_DATE is the run's (or the preview's) UTC date, taken once, and a new date
queues a run of the outputs that read it, which then recomputes."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from support.derived_runs import quick_settings
from support.factories import Tenant, append, make_source, read_data
from support.transformations import output, preview, run
from tally.core.errors import DefinitionRejectedError, RunFailedError
from tally.runtime import Runtime
from tally.settings import Settings
from tally.storage.derived import records as derived_records

D = Decimal  # the values as the rows' JSON text holds them, exactly

# Every column is text: each holds a value the loader cannot type (row 4).
BANK_CSV = (
    "k,num,whole,day,eu,dmy,ymd\n"
    '1,12,42,2024-02-29,"3.445,63",01/10/2026,20260101\n'
    '2,-3.455,-7,1999-12-31,"-1.000.000,5",1/2/2026,19991231\n'
    '3,1.005,+0,0001-01-01,"0,01",31/12/1999,00010101\n'
    "4,x,x,x,x,x,x\n"
)


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    return quick_settings(request, backend, tmp_path, max_attempts=1)


def rows_of(runtime: Runtime, tenant: Tenant, sql: str, content: str) -> list[dict[str, Any]]:
    source = make_source(runtime.engine, tenant, content)
    body = {"name": "t", "inputs": {"t": source.id}, "sql": sql}
    previewed = preview(runtime, workspace_id=tenant.workspace_id, body=body)
    return [json.loads(r, parse_float=Decimal) for r in previewed.rows]


def failure_of(runtime: Runtime, tenant: Tenant, sql: str, content: str) -> tuple[str, str]:
    """The preview's error and the run's, which must be the same."""
    source = make_source(runtime.engine, tenant, content)
    body = {"name": f"t{source.id}", "inputs": {"t": source.id}, "sql": sql}
    with pytest.raises(RunFailedError) as previewed:
        preview(runtime, workspace_id=tenant.workspace_id, body=body)
    derived_id = runtime.transformations.create(workspace_id=tenant.workspace_id, body=body).id
    with pytest.raises(RunFailedError) as failed:
        run(runtime, derived_id)
    return previewed.value.message, failed.value.message


def test_casts_of_text_give_exact_decimals_integers_and_dates(
    runtime: Runtime, tenant: Tenant
) -> None:
    rows = rows_of(
        runtime,
        tenant,
        "SELECT t.k, CAST(t.num AS DECIMAL(18, 2)) AS d2, t.num::numeric(10, 0) AS d0, "
        "CAST(' ' || t.whole || ' ' AS INTEGER) AS i, CAST(t.day AS DATE) AS day, "
        "CAST(t.day AS DATE) + 1 AS next, "
        "CAST(parse_decimal(t.eu, ',', '.') AS DECIMAL(18, 2)) AS eu, "
        "ROUND(parse_decimal(t.eu, ',', '.'), 1) AS eu1, to_date(t.dmy, 'DD/MM/YYYY') AS dmy, "
        "to_date(t.ymd, 'YYYYMMDD') AS ymd FROM t WHERE t.k < 4 ORDER BY t.k",
        BANK_CSV,
    )
    assert rows == [
        {"k": 1, "d2": D("12.00"), "d0": 12, "i": 42, "day": "2024-02-29", "next": "2024-03-01",
         "eu": D("3445.63"), "eu1": D("3445.6"), "dmy": "2026-10-01", "ymd": "2026-01-01"},
        {"k": 2, "d2": D("-3.46"), "d0": -3, "i": -7, "day": "1999-12-31", "next": "2000-01-01",
         "eu": D("-1000000.50"), "eu1": D("-1000000.5"), "dmy": "2026-02-01", "ymd": "1999-12-31"},
        {"k": 3, "d2": D("1.01"), "d0": 1, "i": 0, "day": "0001-01-01", "next": "0001-01-02",
         "eu": D("0.01"), "eu1": D("0.0"), "dmy": "1999-12-31", "ymd": "0001-01-01"},
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        (
            "SELECT CAST(t.num AS DECIMAL(18, 2)) AS a FROM t",
            "the value 'x' is not a decimal number (CAST to decimal(2) at line 1, column 8; "
            "row 2 of t)",
        ),
        (
            "SELECT t.k, CAST(t.whole AS INTEGER) AS a FROM t",
            "the value '4,5' is not a whole number (CAST to integer at line 1, column 13; "
            "row 2 of t)",
        ),
        (
            "SELECT CAST(t.day AS DATE) AS a FROM t",
            "the value '2023-02-29' is not a date in the format YYYY-MM-DD "
            "(CAST to date at line 1, column 8; row 2 of t)",
        ),
        (
            "SELECT\n  to_date(t.dmy, 'DD.MM.YYYY') AS a FROM t",
            "the value '01/10/2026' is not a date in the format DD.MM.YYYY "
            "(to_date with DD.MM.YYYY at line 2, column 3; row 1 of t)",
        ),
        (
            "SELECT CAST(parse_decimal(t.eu, ',', '.') AS DECIMAL(18, 2)) AS a FROM t",
            "the value '1.23,4' is not a decimal number (parse_decimal at line 1, column 13; "
            "row 2 of t)",
        ),
        (
            "SELECT CAST(t.big AS INTEGER) AS a FROM t",
            "the value '9223372036854775808' is out of range (CAST to integer at line 1, "
            "column 8; row 2 of t)",
        ),
        (
            "SELECT CAST(t.big AS DECIMAL(18, 2)) AS a FROM t",
            "the value '9223372036854775808' is out of range "
            "(CAST to decimal(2) at line 1, column 8; row 2 of t)",
        ),
        (
            "SELECT x.k, SUM(CAST(x.whole AS INTEGER)) AS a FROM t AS x GROUP BY x.k",
            "the value '4,5' is not a whole number (CAST to integer at line 1, column 17; "
            "row 2 of t)",
        ),
        (
            "SELECT t.num, CAST(t.num AS INTEGER) AS a FROM t GROUP BY t.num HAVING t.num <> 'x'",
            "the value '1.5' is not a whole number (CAST to integer at line 1, column 15)",
        ),
        (
            "SELECT t.num, SUM(1) OVER (PARTITION BY CAST(t.num AS INTEGER)) AS a FROM t "
            "GROUP BY t.num HAVING t.num <> 'x'",
            "the value '1.5' is not a whole number (CAST to integer at line 1, column 41)",
        ),
        (
            "SELECT SUM(CAST(t.whole AS INTEGER)) OVER (ORDER BY t.k) AS a FROM t",
            "the value '4,5' is not a whole number (CAST to integer at line 1, column 12; "
            "row 2 of t)",
        ),
        (
            "WITH c AS (SELECT t.day AS d FROM t) SELECT CAST(c.d AS DATE) AS a FROM c",
            "the value '2023-02-29' is not a date in the format YYYY-MM-DD "
            "(CAST to date at line 1, column 45)",
        ),
    ],
)
def test_a_value_that_does_not_fit_fails_the_run_and_the_preview_naming_it(
    runtime: Runtime, tenant: Tenant, sql: str, said: str
) -> None:
    content = (
        "k,num,whole,day,dmy,eu,big\n"
        '1,1.5,4,2024-01-01,01/10/2026,"1.234,5",9223372036854775807\n'
        '2,x,"4,5",2023-02-29,01/10/2026,"1.23,4",9223372036854775808\n'
    )
    if "big AS DECIMAL" in sql:
        content = content.replace("9223372036854775807", "1")  # 2 decimals: 92233720368547758.07
    previewed, failed = failure_of(runtime, tenant, sql, content)
    assert previewed == failed == f"the query failed: {said}"


def test_a_failure_quotes_a_long_value_by_its_start_on_both(
    runtime: Runtime, tenant: Tenant
) -> None:
    value = "it's " + "9" * 120
    content = f'k,v\n1,"{value}"\n'
    previewed, _ = failure_of(runtime, tenant, "SELECT CAST(t.v AS INTEGER) AS a FROM t", content)
    shown = "'" + value[:100].replace("'", "''") + "'..."
    assert previewed == (
        f"the query failed: the value {shown} is not a whole number "
        "(CAST to integer at line 1, column 8; row 1 of t)"
    )


def test_a_number_of_thousands_of_digits_is_out_of_range_alike_on_both(
    runtime: Runtime, tenant: Tenant
) -> None:
    """Past MAX_NUMBER_CHARS: before PostgreSQL's NUMERIC overflows and Python's int()
    refuses the digits (4,300), each with words of its own."""
    value = "1" * 200_000
    sql = "SELECT TRY_CAST(t.v AS INTEGER) AS a, CAST(t.v AS DECIMAL(18, 2)) AS b FROM t"
    previewed, _ = failure_of(runtime, tenant, sql, f"k,v\n1,{value}\n")
    assert previewed == (
        f"the query failed: the value '{'1' * 100}'... is out of range "
        "(CAST to decimal(2) at line 1, column 39; row 1 of t)"
    )


def test_try_cast_gives_null_for_what_does_not_fit(runtime: Runtime, tenant: Tenant) -> None:
    rows = rows_of(
        runtime,
        tenant,
        "SELECT t.k, TRY_CAST(t.num AS DECIMAL(18, 2)) AS d, TRY_CAST(t.whole AS INTEGER) AS i, "
        "TRY_CAST(t.day AS DATE) AS day, TRY_CAST(to_date(t.dmy, 'DD/MM/YYYY') AS DATE) AS dmy, "
        "TRY_CAST((parse_decimal(t.eu, ',', '.')) AS DECIMAL(18, 2)) AS eu FROM t ORDER BY t.k",
        "k,num,whole,day,dmy,eu\n"
        '1,1.5,4,2024-01-01,01/10/2026,"1.234,5"\n'
        '2,x,"4,5",2023-02-29,32/10/2026,"1.23,4"\n'
        "3,,,,,\n",
    )
    assert rows == [
        {
            "k": 1,
            "d": D("1.50"),
            "i": 4,
            "day": "2024-01-01",
            "dmy": "2026-10-01",
            "eu": D("1234.5"),
        },
        {"k": 2, "d": None, "i": None, "day": None, "dmy": None, "eu": None},
        {"k": 3, "d": None, "i": None, "day": None, "dmy": None, "eu": None},
    ]


def test_distinct_ordered_by_a_conversion_it_outputs_runs_on_both(
    runtime: Runtime, tenant: Tenant
) -> None:
    """PostgreSQL wants DISTINCT's ORDER BY expressions among its outputs: the two
    conversions, each naming its own place, were not the same expression there."""
    rows = rows_of(
        runtime,
        tenant,
        "SELECT DISTINCT CAST(t.v AS INTEGER) AS a FROM t WHERE t.v <> 'x' "
        "ORDER BY CAST(t.v AS INTEGER) DESC",
        "v\n1\n2\n2\nx\n",
    )
    assert rows == [{"a": 2}, {"a": 1}]


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "SELECT CAST('1,5' AS DECIMAL(18, 2)) AS a",
            "the value '1,5' is not a decimal number (CAST to decimal(2)) (line 1, column 13)",
        ),
        (
            "SELECT to_date('2024-13-01', 'YYYY-MM-DD') AS a",
            "the value '2024-13-01' is not a date in the format YYYY-MM-DD "
            "(to_date with YYYY-MM-DD) (line 1, column 16)",
        ),
        (
            "SELECT to_date(t.v, 'Mon DD, YYYY') AS a FROM t",
            "to_date: a date format holds YYYY, MM and DD once each, between the separators "
            "'/' '-' '.' ',' ':' ' ' (line 1, column 8)",
        ),
        (
            "SELECT to_date(t.v, t.v) AS a FROM t",
            "to_date's format must be a quoted text, as in 'DD/MM/YYYY' (line 1, column 8)",
        ),
        (
            "SELECT parse_decimal(t.v, ',', '.') AS a FROM t",
            "parse_decimal must state its scale, as in CAST(parse_decimal(x, ',', '.') AS "
            "DECIMAL(18, 2)) (output column 'a') (line 1, column 8)",
        ),
        (
            "SELECT CAST(parse_decimal(t.v, ',', ',') AS DECIMAL(18, 2)) AS a FROM t",
            "parse_decimal: the decimal and thousands separators must differ (line 1, column 13)",
        ),
        (
            "SELECT CAST(t.v AS NUMERIC) AS a FROM t",
            "DECIMAL needs a scale, as in DECIMAL(18, 2) (line 1, column 8)",
        ),
        (
            "SELECT CAST(t.v AS TIMESTAMP) AS a FROM t",
            "CAST from text to timestamp is not supported",
        ),
        ("SELECT to_number(t.v, '999D99') AS a FROM t", "the function TO_NUMBER is not allowed"),
    ],
)
def test_conversions_refused_at_the_check(
    runtime: Runtime, tenant: Tenant, sql: str, message: str
) -> None:
    source = make_source(runtime.engine, tenant, "v\nabc\n")
    body = {"name": "t", "inputs": {"t": source.id}, "sql": sql}
    with pytest.raises(DefinitionRejectedError) as refused:
        runtime.transformations.create(workspace_id=tenant.workspace_id, body=body)
    assert refused.value.problems[0].message.startswith(message)


# --- CURRENT_DATE ------------------------------------------------------------------------

AGE_SQL = "SELECT t.ref, CURRENT_DATE - t.booked AS age, CURRENT_DATE AS today FROM t"


class Clock:
    def __init__(self, now: dt.datetime) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The clock every part reading CURRENT_DATE asks (core/clock.utc_now, as imported)."""
    fixed = Clock(dt.datetime(2026, 11, 29, 23, 59, 59, tzinfo=dt.UTC))
    for module in ("transformations.runs", "transformations.previews", "derived.runs"):
        monkeypatch.setattr(f"tally.services.{module}.utc_now", fixed)
    return fixed


def table(runtime: Runtime, tenant: Tenant, derived_id: int) -> list[tuple[Any, ...]]:
    rows = read_data(runtime, tenant, output(runtime, derived_id).id, ordering="ref")
    return [(r["ref"], r["age"], r["today"]) for r in rows]


def test_current_date_is_the_previews_and_runs_utc_date(
    runtime: Runtime, tenant: Tenant, clock: Clock
) -> None:
    source = make_source(runtime.engine, tenant, "ref,booked\nA,2026-11-01\nB,2026-11-29\n")
    body = {"name": "ages", "inputs": {"t": source.id}, "sql": AGE_SQL + " ORDER BY t.ref"}
    previewed = preview(runtime, workspace_id=tenant.workspace_id, body=body).rows
    assert [json.loads(r) for r in previewed] == [
        {"ref": "A", "age": 28, "today": "2026-11-29"},
        {"ref": "B", "age": 0, "today": "2026-11-29"},
    ]
    derived_id = runtime.transformations.create(workspace_id=tenant.workspace_id, body=body).id
    assert run(runtime, derived_id)["current_date"] == "2026-11-29"
    assert table(runtime, tenant, derived_id) == [("A", 28, "2026-11-29"), ("B", 0, "2026-11-29")]


def test_a_new_date_queues_a_run_that_recomputes_what_reads_it(
    runtime: Runtime, tenant: Tenant, clock: Clock
) -> None:
    source = make_source(runtime.engine, tenant, "ref,booked\nA,2026-11-01\n")
    ages = runtime.transformations.create(
        workspace_id=tenant.workspace_id,
        body={"name": "ages", "inputs": {"t": source.id}, "sql": AGE_SQL},
    ).id
    plain = runtime.transformations.create(
        workspace_id=tenant.workspace_id,
        body={"name": "plain", "inputs": {"t": source.id}, "sql": "SELECT t.ref FROM t"},
    ).id
    derived = runtime.derived
    derived.queue_changed_inputs()  # the process's first look at the date
    for derived_id in (ages, plain):
        run(runtime, derived_id)
    assert derived.queue_new_date() is False  # the same date: nothing to queue

    append(runtime, source.id, "ref,booked\nB,2026-11-29\n")
    assert derived.queue_changed_inputs() is True  # the append's runs, queued and run:
    run(runtime, plain)
    first = run(runtime, ages)
    assert first["incremental"] is True  # the same date: the new rows are appended
    assert table(runtime, tenant, ages) == [("A", 28, "2026-11-29"), ("B", 0, "2026-11-29")]

    clock.now += dt.timedelta(seconds=1)  # midnight, UTC
    assert derived.queue_changed_inputs() is True  # the workers' job: it wakes them
    with runtime.engine.connect() as conn:
        queued = {
            i: derived_records.find_derived(conn, i).run_due_at  # type: ignore[union-attr]
            for i in (ages, plain)
        }
    assert queued[ages] is not None
    assert queued[plain] is None
    assert derived.run_one(worker="test") is True
    assert derived.run_one(worker="test") is False
    assert table(runtime, tenant, ages) == [("A", 29, "2026-11-30"), ("B", 1, "2026-11-30")]
    with runtime.engine.connect() as conn:
        record = derived_records.find_derived(conn, ages)
    assert record is not None
    assert record.last_run is not None
    assert (record.last_run["current_date"], record.last_run["incremental"]) == (
        "2026-11-30",
        False,
    )
    assert derived.queue_new_date() is False

    append(runtime, source.id, "ref,booked\nC,2026-11-30\n")
    assert run(runtime, ages)["incremental"] is True  # within the day, incremental again
    assert table(runtime, tenant, ages)[-1] == ("C", 0, "2026-11-30")
