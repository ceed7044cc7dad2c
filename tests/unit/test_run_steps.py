"""A derived run's steps (services/derived/phases.py): a phase is published once when
the run enters it, not at each of its steps; the split adds a phase's steps up, in the
order the run went through them; every step the engine names has a phase."""

from __future__ import annotations

from tally.services.derived.phases import PHASE_OF, PHASES, STALLED, STARTING, Steps


def test_each_phase_is_published_once_as_the_run_enters_it() -> None:
    entered: list[str] = []
    steps = Steps(entered.append)
    for step in ("clear", "read", "match", "digest", "build", "publish", "finish", "companion"):
        steps.begin(step)
    steps.end()
    assert entered == [
        "reading",
        "matching",
        "writing",
        "publishing",
        "indexing",
    ]  # not starting: the claim's
    split = steps.phases()
    assert list(split) == [STARTING, *entered]
    assert split["matching"] == round(steps.seconds["match"] + steps.seconds["digest"], 3)


def test_a_phase_entered_again_is_published_again() -> None:
    entered: list[str] = []
    steps = Steps(entered.append)
    for step in ("read", "incremental", "read", "match"):  # an incremental run found unsound
        steps.begin(step)
    assert entered == ["reading", "matching", "reading", "matching"]


def test_every_phase_is_named_once() -> None:
    assert set(PHASE_OF.values()) | {STARTING, STALLED} == set(PHASES)
    assert len(PHASES) == len(set(PHASES))
