"""Names and browser origins: the rules every edge applies."""

from __future__ import annotations

import pytest

from tally.core.names import NAME_MAX_CHARS, canonical_origin, name_problem


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("Acme", None),
        ("bank.amount", None),
        ("Zürich Treasury €", None),
        ("x" * NAME_MAX_CHARS, None),
        ("", "must not be blank"),
        (" \t", "must not be blank"),
        ("x" * (NAME_MAX_CHARS + 1), f"must be at most {NAME_MAX_CHARS} characters"),
        ("a\x00b", "must not contain control characters"),
        ("a\nb", "must not contain control characters"),
        ("a\x7fb", "must not contain control characters"),
    ],
)
def test_name_problem(value: str, problem: str | None) -> None:
    assert name_problem(value) == problem


@pytest.mark.parametrize(
    ("value", "origin"),
    [
        ("https://ops.acme.example", "https://ops.acme.example"),
        ("HTTPS://Ops.Acme.Example", "https://ops.acme.example"),
        ("https://ops.acme.example/", "https://ops.acme.example"),
        ("https://ops.acme.example:443", "https://ops.acme.example"),
        ("http://ops.acme.example:80", "http://ops.acme.example"),
        ("http://localhost:3000", "http://localhost:3000"),
        ("https://ops.acme.example:8443", "https://ops.acme.example:8443"),
        ("http://[::1]:8080", "http://[::1]:8080"),
        ("https://bücher.example", "https://xn--bcher-kva.example"),
        (" https://ops.acme.example ", "https://ops.acme.example"),
    ],
)
def test_origins_take_the_form_browsers_send(value: str, origin: str) -> None:
    assert canonical_origin(value) == origin


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("ops.acme.example", "expected http(s)://host[:port]"),
        ("*", "expected http(s)://host[:port]"),
        ("null", "expected http(s)://host[:port]"),
        ("ftp://ops.acme.example", "expected http(s)://host[:port]"),
        ("https://", "expected http(s)://host[:port]"),
        ("https://ops acme.example", "expected http(s)://host[:port]"),
        ("https://ops.acme.example/app", "no path, query or fragment"),
        ("https://ops.acme.example?x=1", "no path, query or fragment"),
        ("https://ops.acme.example#top", "no path, query or fragment"),
        ("https://user:pw@ops.acme.example", "must not carry credentials"),
        ("https://ops.acme.example:99999", "Port out of range"),
        ("https://ops.acme.example:http", "Port could not be cast"),
    ],
)
def test_values_that_are_not_origins_are_refused_saying_why(value: str, why: str) -> None:
    with pytest.raises(ValueError, match="is not an origin") as refused:
        canonical_origin(value)
    assert why in str(refused.value)
    assert repr(value) in str(refused.value)
