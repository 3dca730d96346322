"""The chaos harness's fast version (one fault, 200 turns): turns accepted the way the
API accepts them survive Redis losing everything before any worker saw them, and are
consolidated exactly once. The full table: `python -m bench.chaos.run`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.chaos.harness import (
    Services,
    expected_counts,
    make_input,
    run_wipe_before_workers,
)


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    svc = Services(tmp_path)
    svc.start()
    yield svc
    svc.stop()


def test_outbox_turns_survive_a_redis_wipe_exactly_once(services: Services) -> None:
    turns = make_input(200)
    result = run_wipe_before_workers(services, turns)
    expected = expected_counts(turns)
    assert result.sent == 200
    assert result.processed == 200 and result.lost == 0
    assert result.duplicated == 0 and result.duplicate_memories == 0
    assert result.memories == expected["memories"]
    assert result.reinforcements == expected["reinforcements"]
    assert "redispatched=0" not in result.notes  # only the sweeper could have sent them
