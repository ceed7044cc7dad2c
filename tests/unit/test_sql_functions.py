"""SQLite's regular expression functions (storage/sql_functions.py) on their own: RE2's
linear time, PostgreSQL's replacement text, and the limits a call runs within."""

from __future__ import annotations

import time

import pytest

from tally.storage.sql_functions import (
    MATCH_BUDGET,
    FunctionBudget,
    PatternError,
    SqlTimeLimitError,
    compile_pattern,
)


def test_a_catastrophic_pattern_for_backtracking_answers_at_once() -> None:
    """`^(a+)+$` took Python's `re` over 100 s on these 29 characters (issue #30)."""
    assert FunctionBudget().like("a" * 28 + "!", "^(a+)+$") is False
    assert FunctionBudget().like("a" * 5000 + "!", "(x+x+)+y|^(a|aa)+$") is False


@pytest.mark.parametrize(
    ("replacement", "expected"),
    [
        ("<\\1>", "x<b>y"),  # a group
        ("<\\&>", "x<ab>y"),  # the whole match
        ("\\2\\9", "xy"),  # groups past the pattern's: nothing
        ("\\n\\0\\x", "x\\n\\0\\xy"),  # other backslashes are themselves, no escapes
        ("\\\\1", "x\\1y"),  # `\\` is one backslash
        ("end\\", "xend\\y"),  # a backslash last
    ],
)
def test_replacements_read_as_postgresql_reads_them(replacement: str, expected: str) -> None:
    assert FunctionBudget().replace("xaby", "a(b)", replacement) == expected


def test_no_match_replaces_nothing() -> None:
    assert FunctionBudget().replace("xyz", "a(b)", "\\1") == "xyz"


def test_dot_matches_a_newline_as_on_postgresql() -> None:
    assert FunctionBudget().like("a\nb", "^a.b$") is True
    assert FunctionBudget().substr("a\nb", "a.b") == "a\nb"


def test_nulls_give_null() -> None:
    budget = FunctionBudget()
    assert budget.like(None, "a") is None
    assert budget.substr("a", None) is None
    assert budget.replace("a", "a", None) is None


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("(a)\\1", "invalid regular expression '(a)\\1': invalid escape sequence: \\1"),
        ("a(?=b)", "lookaround such as (?= are not supported"),
        ("(", "invalid regular expression '(': missing ): ("),
        ("[a-q][^u-z]{999}x" * 20, "is too large: its compiled form needs more than 1 MiB"),
    ],
)
def test_patterns_re2_cannot_run_are_named_in_the_error(pattern: str, message: str) -> None:
    with pytest.raises(PatternError, match="regular expression") as refused:
        compile_pattern(pattern)
    assert message in str(refused.value)
    budget = FunctionBudget()
    with pytest.raises(PatternError):
        budget.like("ab", pattern)
    assert budget.failure == str(refused.value)  # what the statement's error will say


def test_a_long_pattern_is_shown_by_its_start() -> None:
    with pytest.raises(PatternError) as refused:
        compile_pattern("(" + "a" * 200)
    assert f"'({'a' * 99}...'" in str(refused.value)


def test_a_call_past_the_match_budget_fails_naming_the_pattern() -> None:
    program = compile_pattern("[0-9]{500}").programsize
    text = "1" * (MATCH_BUDGET // program + 1)
    budget = FunctionBudget()
    with pytest.raises(PatternError, match=r"'\[0-9\]\{500\}' is too costly over a text of"):
        budget.like(text, "[0-9]{500}")
    assert budget.failure is not None
    assert budget.like(text[: MATCH_BUDGET // program], "[0-9]{500}") is True


def test_a_call_after_the_deadline_fails() -> None:
    budget = FunctionBudget(deadline=time.monotonic() - 1)
    with pytest.raises(SqlTimeLimitError):
        budget.substr("a", "a")
    assert budget.failure is None  # a time limit, not the pattern's fault
