"""A user whose turns failed a batch (memwell/pipeline/isolation.py marks them: still
pending, `error` set) is never taken to top up another batch, and a task of its own
claims it alone (memwell/pipeline/claim.py), on real Postgres."""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import Turn
from memwell.intake.persist import persist_turns
from memwell.intake.turns import IngestPayload, TurnIn
from memwell.pipeline.claim import claim_batch


def test_a_suspect_user_is_left_out_of_top_ups_and_claimed_alone(
    db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    tenant = ids["tenant"]
    turns = [
        TurnIn(id=f"{user}-{n}", user_id=user, session_id="s", content=f"fact {n} of {user}")
        for user in ("suspect", "healthy", "bystander")
        for n in range(2)
    ]
    with db.begin() as session:
        persist_turns(session, IngestPayload(tenant=tenant, turns=turns))
        session.execute(
            update(Turn)
            .where(Turn.tenant == tenant, Turn.user_id == "suspect")
            .values(error="consolidation failed: IntegrityError", attempts=1)
        )

    def claimed(turn_ids: list[str]) -> list[str]:
        with db.begin() as session:
            claim = claim_batch(session, tenant=tenant, turn_ids=turn_ids, limit=64, linger_s=0)
            return sorted(t.id for t in claim.turns)

    # Another user's task tops up with every free user but the suspect one.
    assert claimed(["healthy-0"]) == [
        "bystander-0", "bystander-1", "healthy-0", "healthy-1"]  # fmt: skip
    # The suspect's own task takes the suspect alone: no top-up with the others.
    assert claimed(["suspect-1"]) == ["suspect-0", "suspect-1"]
