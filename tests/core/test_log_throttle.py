"""A line that repeats is written once per interval per kind, and the next one written
says how many were left out; other kinds are not held back by it."""

from __future__ import annotations

import logging

import pytest

from memwell.core.log_throttle import MAX_KINDS, LogThrottle


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def throttle(clock: Clock) -> LogThrottle:
    return LogThrottle(logging.getLogger("test.log_throttle"), interval_s=60.0, clock=clock)


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "test.log_throttle"]


def test_repeats_are_counted_and_reported_with_the_next_line(
    throttle: LogThrottle, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="test.log_throttle")
    written = [throttle.log(logging.ERROR, "q", "item %d bad", n) for n in range(2000)]
    assert written.count(True) == 1 and written[0]
    assert _lines(caplog) == ["item 0 bad"]

    clock.now += 59.0
    assert not throttle.log(logging.ERROR, "q", "item %d bad", 2000)  # still inside
    clock.now += 1.0
    assert throttle.log(logging.ERROR, "q", "item %d bad", 2001)
    assert _lines(caplog)[-1] == "item 2001 bad (2000 more like it in the last 60 s, not logged)"
    clock.now += 60.0
    assert throttle.log(logging.ERROR, "q", "item %d bad", 2002)
    assert _lines(caplog)[-1] == "item 2002 bad"  # nothing left out since


def test_kinds_are_throttled_apart(throttle: LogThrottle, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="test.log_throttle")
    for _ in range(3):
        throttle.log(logging.ERROR, ("ingest", "not JSON"), "ingest: not JSON")
        throttle.log(logging.WARNING, ("embed", "not JSON"), "embed: not JSON")
    assert _lines(caplog) == ["ingest: not JSON", "embed: not JSON"]
    assert [r.levelno for r in caplog.records] == [logging.ERROR, logging.WARNING]


def test_remembered_kinds_are_bounded(
    throttle: LogThrottle, caplog: pytest.LogCaptureFixture
) -> None:
    """A flood of distinct kinds cannot grow the throttle without end: the oldest is
    forgotten, and its next line is written again."""
    caplog.set_level(logging.INFO, logger="test.log_throttle")
    for n in range(MAX_KINDS + 1):
        assert throttle.log(logging.ERROR, n, "kind %d", n)
    assert len(throttle._kinds) == MAX_KINDS
    assert throttle.log(logging.ERROR, 0, "kind %d", 0)  # forgotten, so written
    assert not throttle.log(logging.ERROR, MAX_KINDS, "kind %d", MAX_KINDS)
