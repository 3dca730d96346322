"""Step 3: candidate memories from turns.

The walking skeleton remembers what users say, verbatim, as `episode` memories.
Assistant turns are kept in the episodic log but not remembered: in local mode they
echo retrieved memories, and storing them would feed memory back into itself.
"""

from __future__ import annotations

from memwell.db.models import Turn
from memwell.pipeline.memories import Candidate

REMEMBERED_ROLES = frozenset({"user"})
DEFAULT_IMPORTANCE = 0.5


def candidates_from_turn(turn: Turn) -> list[Candidate]:
    if turn.role not in REMEMBERED_ROLES:
        return []
    content = turn.content.strip()
    return [
        Candidate(
            tenant=turn.tenant,
            user_id=turn.user_id,
            session_id=turn.session_id,
            kind="episode",
            content=content,
            importance=turn.importance if turn.importance is not None else DEFAULT_IMPORTANCE,
            event_time=turn.created_at,
            source_turn_ids=[turn.id],
            agent_id=turn.metadata_.get("agent_id") if turn.metadata_ else None,
        )
    ]
