"""post_json refuses what the SSRF guard refuses, before any connection, and says why
without the query string; HTTP statuses are results, not errors."""

from __future__ import annotations

import pytest

from tally.net.callbacks import CallbackResult, post_json
from tally.net.fetch import AddressPolicy


@pytest.mark.parametrize(
    ("url", "error"),
    [
        (
            "http://127.0.0.1:9/hook?token=s3cret",
            "callback refused: 127.0.0.1 is a loopback address",
        ),
        ("http://10.1.2.3/hook", "callback refused: 10.1.2.3 is a private address"),
        (
            "http://169.254.169.254/latest/meta-data",
            "callback refused: 169.254.169.254 is a link-local address",
        ),
        (
            "http://[::ffff:192.168.0.1]/hook",
            "callback refused: ::ffff:c0a8:1 (reaching 192.168.0.1) is a private address",
        ),
        (
            "ftp://example.com/hook",
            "callback refused: scheme 'ftp' is not allowed (only http and https)",
        ),
        (
            "http://user:pw@example.com/hook",
            "callback refused: credentials inside the URL are not supported",
        ),
        ("not a url", "callback refused: scheme missing is not allowed (only http and https)"),
    ],
)
def test_refused_callback_urls_are_results_with_the_reason(url: str, error: str) -> None:
    result = post_json(url, b"{}", {}, policy=AddressPolicy(), timeout_seconds=1.0)
    assert (result.status_code, result.excerpt, result.error) == (None, "", error)
    assert result.duration_ms < 1000
    assert not result.is_success


@pytest.mark.parametrize(
    ("status", "success"),
    [
        (None, False),
        (199, False),
        (200, True),
        (204, True),
        (299, True),
        (302, False),
        (410, False),
        (500, False),
    ],
)
def test_only_a_2xx_status_is_success(status: int | None, success: bool) -> None:
    assert CallbackResult(status, "", None, 0).is_success is success
