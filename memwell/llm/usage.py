"""Token usage of the model endpoint, per tenant, day, stage and model (table llm_usage).

Written in its own short transaction right after each call: tokens are spent whether
or not the task that asked for them commits.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import func
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import LlmUsage


def record_usage(
    session: Session,
    *,
    tenant: str,
    stage: str,
    model: str,
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    calls: int = 1,
    failures: int = 0,
    fallbacks: int = 0,
    fallback_reason: str | None = None,
    deferrals: int = 0,
) -> None:
    """Add to today's counters for (tenant, stage, model); `fallbacks` also count
    under `fallback_reason` in fallback_reasons."""
    values = {
        "tenant": tenant,
        "day": datetime.now(UTC).date(),
        "stage": stage,
        "model": model[:128],
        "calls": calls,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "failures": failures,
        "fallbacks": fallbacks,
        "deferrals": deferrals,
        "fallback_reasons": {fallback_reason: fallbacks} if fallback_reason and fallbacks else {},
    }
    stmt = insert(LlmUsage).values(values)
    counters = ("calls", "prompt_tokens", "completion_tokens", "failures", "fallbacks", "deferrals")
    set_: dict[str, object] = {
        c: getattr(LlmUsage, c) + getattr(stmt.excluded, c) for c in counters
    }
    if fallback_reason and fallbacks:
        total = func.coalesce(LlmUsage.fallback_reasons[fallback_reason].as_integer(), 0)
        set_["fallback_reasons"] = LlmUsage.fallback_reasons.op("||")(
            func.jsonb_build_object(fallback_reason, total + fallbacks)
        )
    stmt = stmt.on_conflict_do_update(index_elements=["tenant", "day", "stage", "model"], set_=set_)
    session.execute(stmt)


class UsageRecorder:
    """Records usage through its own sessions (one short transaction per call)."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def __call__(self, **fields: object) -> None:
        with self._sessions.begin() as session:
            record_usage(session, **fields)  # type: ignore[arg-type]
