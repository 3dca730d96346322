"""Fallbacks by step and reason persist in llm_usage and show in `memwell status`."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from memwell.llm.usage import record_usage
from memwell.maintenance.status import StackStatus, read_store, render


def _read(db: sessionmaker[Session]) -> StackStatus:
    status = StackStatus()
    read_store(status, db)
    assert not status.errors
    return status


def test_fallback_reasons_add_up_and_show_in_status(
    db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    before = _read(db).llm_fallbacks.get("analyze", {})
    with db.begin() as session:
        for reason, items in (("timeout", 3), ("timeout", 2), ("invalid_output", 4)):
            record_usage(
                session, tenant=ids["tenant"], stage="analyze", model="m", calls=0,
                failures=1, fallbacks=items, fallback_reason=reason,
            )  # fmt: skip
        record_usage(session, tenant=ids["tenant"], stage="analyze", model="m", prompt_tokens=9)
    after = _read(db)
    counts = after.llm_fallbacks["analyze"]
    assert counts["timeout"] - before.get("timeout", 0) == 5
    assert counts["invalid_output"] - before.get("invalid_output", 0) == 4
    screen = render(after)
    assert "LLM fallbacks" in screen
    assert f"invalid_output {counts['invalid_output']}" in screen
