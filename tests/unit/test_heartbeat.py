"""The one lease heartbeat (files, derived runs): renews every third of the lease until
its block ends, stops once the lease is lost, and logs a failed renewal and goes on."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pytest

from tally.services.heartbeat import Heartbeat

LEASE = 0.03  # a renewal every 10 ms
WAIT = 10.0  # how long a test waits for the thread at most


def beat(renew: Callable[[], bool]) -> Heartbeat:
    return Heartbeat(
        renew,
        lease_seconds=LEASE,
        log=logging.getLogger("tally.test"),
        failure_event="lease_renewal_failed",
        context={"file_id": 7},
    )


def test_it_renews_until_its_block_ends() -> None:
    calls: list[int] = []
    renewed = threading.Event()

    def renew() -> bool:
        calls.append(1)
        if len(calls) == 3:
            renewed.set()
        return True

    with beat(renew) as heartbeat:
        assert renewed.wait(WAIT)
    assert not heartbeat.lost
    assert len(calls) >= 3


def test_a_lost_lease_ends_the_beat() -> None:
    calls: list[int] = []
    asked = threading.Event()

    def renew() -> bool:
        calls.append(1)
        asked.set()
        return False  # another worker's now

    with beat(renew) as heartbeat:
        assert asked.wait(WAIT)
    assert heartbeat.lost
    assert calls == [1]  # not asked again


def test_a_failed_renewal_is_logged_and_tried_again(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []
    again = threading.Event()

    def renew() -> bool:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("the database went away")
        again.set()
        return True

    with caplog.at_level(logging.ERROR, logger="tally.test"), beat(renew) as heartbeat:
        assert again.wait(WAIT)
    assert not heartbeat.lost
    [failed] = [r for r in caplog.records if r.getMessage() == "lease_renewal_failed"]
    assert failed.file_id == 7  # type: ignore[attr-defined]
    assert failed.exc_info is not None
