"""Hypothesis without the checks that measure the machine (issue #30, point 11).

A deadline fails an example that took too long, and the `too_slow` health check fails
a test whose data took too long to generate: on a loaded 2-core CI machine both fail
correct code (test_inference's 400-example test did, 9 inputs in 1.02 s). The profile
below turns both off for every test; a test's own `@settings` inherits it, and
`speed_checks` finds one that turns either back on, which conftest.py refuses at
collection.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

PROFILE = "speed-independent"


def register_profile() -> None:
    settings.register_profile(
        PROFILE,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        print_blob=True,
    )
    settings.load_profile(PROFILE)


def speed_checks(chosen: settings) -> list[str]:
    """What in `chosen` depends on the machine's speed: empty when nothing does."""
    found = []
    if chosen.deadline is not None:
        found.append(f"deadline={chosen.deadline}")
    if HealthCheck.too_slow not in chosen.suppress_health_check:
        found.append("the too_slow health check")
    return found
