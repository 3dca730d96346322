"""Which question a turn answers, found in Postgres: ties in event time are broken by
arrival order, only the same session counts, and small talk is no question."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import Turn
from memwell.intake.persist import persist_turns
from memwell.intake.turns import IngestPayload, TurnIn
from memwell.pipeline.replies import questions_answered

SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def test_the_previous_turn_of_the_session_supplies_the_question(
    db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    tenant, user = ids["tenant"], ids["user"]

    def turn(turn_id: str, content: str, session_id: str = "s1", role: str = "user") -> TurnIn:
        return TurnIn(
            id=f"{user}-{turn_id}", user_id=user, session_id=session_id, role=role,
            content=content, created_at=SAID, metadata={"speaker": "Mel"},
        )  # fmt: skip

    payload = IngestPayload(
        tenant=tenant,
        turns=[
            turn("a", "Mel: Hi! Busy week. What did you do yesterday?", role="assistant"),
            turn("b", "I went hiking with my sister."),
            turn("c", "It rained the whole time."),  # the previous turn asks nothing
            turn("d", "Where do you live now?", session_id="s2"),
            turn("e", "In Lisbon, since May.", session_id="s2"),
            turn("f", "Back in the first session: no question before me."),
            turn("g", "Nice to meet you, Ada! How can I assist you today?", "s3", "assistant"),
            turn("h", "I prefer Rust for systems programming.", session_id="s3"),
        ],
    )
    with db.begin() as session:
        persist_turns(session, payload)
    with db.begin() as session:
        rows = session.scalars(select(Turn).where(Turn.tenant == tenant)).all()
        found = questions_answered(session, tenant, rows)
    assert {k.removeprefix(f"{user}-"): (v.turn_id, v.text) for k, v in found.items()} == {
        "b": (f"{user}-a", "What did you do yesterday?"),
        "e": (f"{user}-d", "Where do you live now?"),
    }  # h answers small talk, which asks nothing about Rust
