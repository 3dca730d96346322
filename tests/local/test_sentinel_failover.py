"""Redis failover behind Sentinel loses no acknowledged turn (the short form of
`python -m bench.chaos.run --faults sentinel-failover`).

Real processes on loopback: a Valkey primary, its replica and three sentinels, the
API, two Celery workers and beat. Turns flow in through POST /v1/turns,
`enqueue_turn` and POST /v1/chat while the primary is SIGKILLed; the producers wait
for a replica's ack, so what they were told is what gets stored, once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.chaos.harness import Services
from bench.chaos.sentinel_failover import Answer, run_sentinel_failover, tally_answers


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    svc = Services(tmp_path)
    svc.start()
    yield svc
    svc.stop()


def test_no_acknowledged_turn_is_lost_or_doubled_when_the_primary_dies(
    services: Services,
) -> None:
    result = run_sentinel_failover(services, turns=150, threads=2, drain_timeout_s=120)
    assert result.sent >= 150, result.notes
    assert result.lost == 0 and result.duplicated == 0, result.notes
    assert result.duplicate_memories == 0, result.notes
    # Only 2xx or 503 with Retry-After during the switch, only 2xx after it.
    assert result.errors_during == 0 and result.errors_after == 0, result.notes
    assert result.resumed_s < 30 and result.settled_s < 30, result.notes
    # A chat refused mid-switch is kept as a dead letter for replay, nothing else is.
    assert result.dead_letters <= result.refused, result.notes
    assert "turns processed after the kill: 0" not in result.notes  # workers kept consuming


KILLED = 10.0
SWITCH = [
    Answer(started=9.9, ended=10.01, kind="enqueue", status=200),  # sent before the kill
    Answer(started=10.5, ended=10.6, kind="chat", status=503),
    Answer(started=11.0, ended=11.1, kind="turns", status=503),
    Answer(started=12.0, ended=12.2, kind="enqueue", status=200),
    Answer(started=12.5, ended=12.6, kind="chat", status=200),
]


def test_writes_resume_with_the_first_write_sent_after_the_kill() -> None:
    """A write sent before the kill and acknowledged just after it does not say writes
    resumed: the first one sent after the kill does."""
    tally = tally_answers(SWITCH, KILLED)
    assert tally["during_bad"] == 0 and tally["after_bad"] == 0
    assert tally["resumed_s"] == pytest.approx(2.2)
    assert tally["settled_s"] == pytest.approx(2.2)


def test_the_switch_lasts_until_the_last_refusal() -> None:
    """Each client finds the new primary on its own: a 503 with Retry-After after
    another client's first acknowledged write is still the switch's; anything else
    then, or anything but a 2xx after the last refusal, is an error."""
    answers = [
        *SWITCH,
        Answer(started=13.0, ended=13.1, kind="chat", status=503),
        Answer(started=13.5, ended=13.6, kind="chat", status=200),
    ]
    tally = tally_answers(answers, KILLED)
    assert (tally["during_bad"], tally["after_bad"]) == (0, 0)
    assert tally["resumed_s"] == pytest.approx(2.2)
    assert tally["settled_s"] == pytest.approx(3.1)
    bare = Answer(started=12.5, ended=12.6, kind="turns", status=503, retry_after=False)
    assert tally_answers([*answers, bare], KILLED)["during_bad"] == 1
    failed = Answer(started=14.0, ended=14.2, kind="enqueue", status=0)
    late = tally_answers([*answers, failed], KILLED)
    assert late["after_bad"] == 1
    assert late["bad_by"] == "enqueue 0 x1"
