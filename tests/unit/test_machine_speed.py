"""Every Hypothesis test runs without a deadline or the too_slow health check (the
profile loaded by conftest.py), and one that turns either back on is found."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies

from support.machine_speed import speed_checks


@given(strategies.integers())
def test_inherits_the_profile(number: int) -> None:
    chosen = getattr(test_inherits_the_profile, "_hypothesis_internal_use_settings")  # noqa: B009
    assert speed_checks(chosen) == [], number


def test_a_deadline_or_the_too_slow_check_is_found() -> None:
    assert speed_checks(settings(deadline=200)) == ["deadline=0:00:00.200000"]
    assert speed_checks(settings(suppress_health_check=[HealthCheck.filter_too_much])) == [
        "the too_slow health check"
    ]
    assert speed_checks(settings(max_examples=5)) == []
