"""Turns recorded as dropped (a session cleared while they were on their way) never
land, stay dropped when delivered again, and make no session row through a summary
request; their neighbours in the same payload are stored."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import ChatSession, DroppedTurn, Turn
from memwell.intake.dropped_turns import SESSION_CLEARED, dropped_among, record_dropped
from memwell.intake.persist import persist_turns
from memwell.intake.turns import IngestPayload, TurnIn
from memwell.pipeline.summarize import LocalSummarizer, fold_into_summary


def test_recorded_turns_are_dropped_at_ingest_and_on_every_redelivery(
    db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    tenant, user, sid = ids["tenant"], ids["user"], ids["session"]
    turns = [
        TurnIn(id=f"{user}-{n}", user_id=user, session_id=sid, content=f"Turn number {n}.")
        for n in range(3)
    ]
    with db.begin() as session:
        record_dropped(session, tenant=tenant, turn_ids=[turns[0].id], reason=SESSION_CLEARED)
    for _ in range(2):  # a redelivered message changes nothing
        with db.begin() as session:
            persist_turns(session, IngestPayload(tenant=tenant, turns=turns))
    with db() as session:
        stored = session.scalars(select(Turn.id).where(Turn.tenant == tenant)).all()
        chat = session.get(ChatSession, (tenant, user, sid))
        assert dropped_among(session, tenant=tenant, turn_ids=[t.id for t in turns]) == {
            turns[0].id
        }
        # The record holds no turn id and no user id in clear.
        record = session.scalars(select(DroppedTurn).where(DroppedTurn.tenant == tenant)).one()
        assert user not in record.turn_hash and record.reason == SESSION_CLEARED
    assert sorted(stored) == [turns[1].id, turns[2].id]
    assert chat is not None and chat.turn_count == 2


def test_a_summary_request_for_dropped_turns_makes_no_session_row(
    db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    key = {"tenant": ids["tenant"], "user_id": ids["user"], "session_id": ids["session"]}
    evicted = [f"{ids['user']}-evicted-{n}" for n in range(2)]
    with db.begin() as session:
        record_dropped(session, tenant=ids["tenant"], turn_ids=evicted, reason=SESSION_CLEARED)
    summarizer = LocalSummarizer(budget_tokens=200, threshold=0.35)
    with db.begin() as session:
        result = fold_into_summary(session, summarizer, turn_ids=evicted, **key)
    assert (result.summary, result.folded) == (None, 0)
    with db() as session:
        assert session.get(ChatSession, (ids["tenant"], ids["user"], ids["session"])) is None
