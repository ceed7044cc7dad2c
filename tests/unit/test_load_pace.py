"""A worker's loads held to a rate while files are being queued (decision 0022): on a
clock the test moves, so every wait is exact."""

from __future__ import annotations

import pytest

from tally.services.loader.pace import BUSY_SECONDS, LoadPace


class Clock:
    """A monotonic clock that moves only when the paced stream sleeps or the test says."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


def pace_at(rate: float, clock: Clock) -> LoadPace:
    return LoadPace(rate, clock=clock, sleep=clock.sleep)


def test_a_load_runs_unpaced_while_no_files_are_queued(clock: Clock) -> None:
    pace = pace_at(100.0, clock)
    assert list(pace.paced(iter([b"x" * 500, b"y" * 500]))) == [b"x" * 500, b"y" * 500]
    assert clock.waits == []


def test_while_files_are_queued_each_chunk_waits_for_the_bytes_sent_before_it(
    clock: Clock,
) -> None:
    pace = pace_at(100.0, clock)
    pace.files_queued()
    chunks = pace.paced(iter([b"x" * 50, b"y" * 30, b"z" * 10]))
    assert next(chunks) == b"x" * 50
    assert clock.waits == []  # the first goes at once
    assert next(chunks) == b"y" * 30
    assert clock.waits == [0.5]
    assert list(chunks) == [b"z" * 10]
    assert clock.waits == [0.5, pytest.approx(0.3)]


def test_time_spent_reading_the_file_counts_towards_the_rate(clock: Clock) -> None:
    pace = pace_at(100.0, clock)
    pace.files_queued()
    chunks = pace.paced(iter([b"x" * 50, b"y" * 50]))
    next(chunks)
    clock.now += 0.1  # the next chunk took a while to read
    next(chunks)
    assert clock.waits == [pytest.approx(0.4)]


def test_pacing_stops_once_no_files_were_queued_for_a_second(clock: Clock) -> None:
    pace = pace_at(100.0, clock)
    pace.files_queued()
    chunks = pace.paced(iter([b"x" * 50, b"y" * 50, b"z" * 50]))
    next(chunks)
    next(chunks)  # waited 0.5 s: still within the busy second
    clock.now += BUSY_SECONDS
    assert list(chunks) == [b"z" * 50]
    assert clock.waits == [0.5]


def test_pacing_starts_when_files_are_queued_mid_load(clock: Clock) -> None:
    pace = pace_at(100.0, clock)
    chunks = pace.paced(iter([b"x" * 50, b"y" * 50, b"z" * 50, b"w" * 50]))
    next(chunks)
    next(chunks)
    pace.files_queued()
    next(chunks)  # the bytes sent before files were queued cost nothing
    next(chunks)
    assert clock.waits == [0.5]  # z's 50 bytes, sent while busy


def test_two_loads_of_one_process_share_the_rate(clock: Clock) -> None:
    pace = pace_at(100.0, clock)
    pace.files_queued()
    first, second = pace.paced(iter([b"a" * 50] * 2)), pace.paced(iter([b"b" * 50] * 2))
    next(first)
    next(second)  # after the first load's 50 bytes: 0.5 s
    next(first)  # after both loads' 100 bytes: 1.0 s from the start
    assert clock.waits == [0.5, 0.5]
    assert clock.now == pytest.approx(1001.0)


def test_a_rate_of_zero_never_paces(clock: Clock) -> None:
    pace = pace_at(0.0, clock)
    pace.files_queued()
    list(pace.paced(iter([b"x" * 500] * 3)))
    assert clock.waits == []
