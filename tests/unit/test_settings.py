"""Renamed settings: the new variable is read, the former one still works (deprecated),
and the new one wins when both are set."""

from __future__ import annotations

import pytest

from tally.settings import load_settings

RENAMED = [
    # (field, former variable, new variable, a value, the value as read)
    (
        "callback_retry_schedule",
        "TALLY_NOTIFICATION_RETRY_SCHEDULE",
        "TALLY_CALLBACK_RETRY_SCHEDULE",
        "1,2,3",
        "1,2,3",
    ),
    (
        "callback_timeout_seconds",
        "TALLY_NOTIFICATION_TIMEOUT_SECONDS",
        "TALLY_CALLBACK_TIMEOUT_SECONDS",
        "7.5",
        7.5,
    ),
]


@pytest.fixture(autouse=True)
def _no_tally_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for _, former, new, _, _ in RENAMED:
        monkeypatch.delenv(former, raising=False)
        monkeypatch.delenv(new, raising=False)


@pytest.mark.parametrize(("field", "former", "new", "value", "read"), RENAMED)
def test_the_former_variable_still_works(
    monkeypatch: pytest.MonkeyPatch, field: str, former: str, new: str, value: str, read: object
) -> None:
    monkeypatch.setenv(former, value)
    assert getattr(load_settings(), field) == read


@pytest.mark.parametrize(("field", "former", "new", "value", "read"), RENAMED)
def test_the_new_variable_wins(
    monkeypatch: pytest.MonkeyPatch, field: str, former: str, new: str, value: str, read: object
) -> None:
    monkeypatch.setenv(former, "99")
    monkeypatch.setenv(new, value)
    assert getattr(load_settings(), field) == read


@pytest.mark.parametrize(("field", "former", "new", "value", "read"), RENAMED)
def test_the_field_name_still_sets_it(
    field: str, former: str, new: str, value: str, read: object
) -> None:
    assert getattr(load_settings(**{field: value}), field) == read


def test_the_schedule_is_read_from_the_former_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TALLY_NOTIFICATION_RETRY_SCHEDULE", "5, 60")
    assert load_settings().retry_schedule() == (5.0, 60.0)


@pytest.mark.parametrize("url", ["tally.example.com", "ftp://tally.example", "https://"])
def test_a_public_url_that_is_not_one_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="TALLY_PUBLIC_URL"):
        load_settings(public_url=url)


def test_the_public_url_loses_its_trailing_slash() -> None:
    assert load_settings(public_url="https://tally.example/").public_url == "https://tally.example"
