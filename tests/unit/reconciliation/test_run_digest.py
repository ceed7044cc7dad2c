"""The bytes a full run's digest is taken over: equal for equal values, different for
different ones, integers past 64 bits included (orjson refuses those: repr's text)."""

from __future__ import annotations

from tally.core.reconciliation import MatchStatus
from tally.services.reconciliation.rows import Match
from tally.services.reconciliation.runs import _serialized


def test_matches_serialize_as_json_and_big_integers_as_text() -> None:
    match = Match(1, MatchStatus.MATCHED, "same reference", None, "keys equal", (1, 2), (3,))
    assert _serialized([match]) == b'[[1,"matched","same reference",null,"keys equal",[1,2],[3]]]'
    assert _serialized([match]) != _serialized([match._replace(difference=0)])
    big = [(2**70, "x")]
    assert _serialized(big) == repr(big).encode()
    assert _serialized(big) != _serialized([(2**70 + 1, "x")])
