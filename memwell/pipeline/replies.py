"""Which question each turn answers: the previous turn of its session, if it asks one.

One query for a whole batch. "Previous" is by event time, then arrival order
(`turns.seq`), because a chat exchange or an imported session shares one event time.
The previous turn need not be in the batch, nor consolidated yet: it only has to be
stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from sqlalchemy import text
from sqlalchemy.orm import Session

from memwell.db.models import Turn
from memwell.pipeline.extract import Question, last_question, speaker_name, without_speaker

_PREVIOUS: Final = text(
    """
    SELECT t.id, p.id AS previous_id, p.content, p.role, p.metadata
    FROM turns t
    CROSS JOIN LATERAL (
        SELECT p.id, p.content, p.role, p.metadata
        FROM turns p
        WHERE p.tenant = t.tenant AND p.user_id = t.user_id AND p.session_id = t.session_id
          AND (p.created_at, p.seq) < (t.created_at, t.seq)
        ORDER BY p.created_at DESC, p.seq DESC
        LIMIT 1
    ) p
    WHERE t.tenant = :tenant AND t.id = ANY(:ids)
    """
)


def questions_answered(session: Session, tenant: str, turns: Sequence[Turn]) -> dict[str, Question]:
    """turn id -> the question its previous turn ended with, for turns that have one."""
    if not turns:
        return {}
    rows = session.execute(_PREVIOUS, {"tenant": tenant, "ids": [t.id for t in turns]})
    found: dict[str, Question] = {}
    for turn_id, previous_id, content, role, metadata in rows:
        question = last_question(without_speaker(content, speaker_name(role, metadata or {})))
        if question is not None:
            found[turn_id] = Question(turn_id=previous_id, text=question)
    return found
