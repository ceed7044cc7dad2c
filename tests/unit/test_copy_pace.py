"""COPY's chunks go no further ahead of the checks than the pace's lead, and all go once
the checks end, however they end."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from tally.services.loader.pace import CopyPace

LINE = b"1,2.50,x\n"


def chunks(count: int, lines: int) -> Iterator[bytes]:
    for _ in range(count):
        yield LINE * lines


def taken(pace: CopyPace, source: Iterator[bytes], into: list[bytes]) -> threading.Thread:
    """A thread taking the paced chunks into `into`, as COPY's thread does."""

    def take() -> None:
        for chunk in pace.paced(source):
            into.append(chunk)

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return thread


def settled(into: list[bytes], expected: int, thread: threading.Thread) -> int:
    """How many chunks were taken once the taker has had time to take what it may."""
    thread.join(0.2)
    assert len(into) <= expected
    return len(into)


def test_chunks_wait_for_the_checks_within_the_lead() -> None:
    pace = CopyPace(lead_lines=25)
    sent: list[bytes] = []
    thread = taken(pace, chunks(10, lines=10), sent)
    assert settled(sent, 2, thread) == 2  # 20 lines ahead of none checked; 30 would pass 25
    pace.checked(40)
    assert settled(sent, 6, thread) == 6  # up to line 65
    pace.checked(100)
    thread.join(2)
    assert not thread.is_alive()
    assert len(sent) == 10


def test_finishing_lets_every_chunk_go() -> None:
    """A first pass that fails half-way still ends the load: the loader finishes the pace
    before it joins COPY's thread."""
    pace = CopyPace(lead_lines=0)
    sent: list[bytes] = []
    thread = taken(pace, chunks(5, lines=3), sent)
    assert settled(sent, 0, thread) == 0
    pace.finish()
    thread.join(2)
    assert not thread.is_alive()
    assert len(sent) == 5


def test_checks_ahead_of_copy_never_hold_it() -> None:
    pace = CopyPace(lead_lines=0)
    pace.checked(1_000)
    assert list(pace.paced(chunks(4, lines=250))) == [LINE * 250] * 4
