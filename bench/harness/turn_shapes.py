"""The data shapes the consolidation bench feeds its workers (`--shape`).

- interleaved: many users' conversations at once, turn by turn in round robin, as a
  busy service receives them;
- sequential: one conversation after another, as an import (or one busy user at a
  time) sends them;
- heavy: every turn from one user: a long-lived assistant, an imported history.

The source turns are copied under new conversation ids until there are `limit` of
them (LoCoMo dev has 5 conversations; four copies make 15 users of a few thousand
turns), each copy with its own turn, user and session ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import zip_longest

from memwell.intake.turns import TurnIn

SHAPES = ("interleaved", "sequential", "heavy")
HEAVY_USER = "heavy-user"


def _copies(source: Sequence[TurnIn], limit: int) -> list[TurnIn]:
    out: list[TurnIn] = []
    copy = 0
    while len(out) < limit:
        for t in source:
            if len(out) == limit:
                break
            if copy == 0:
                out.append(t)
                continue
            tag = f"-copy{copy}"
            out.append(
                t.model_copy(
                    update={
                        "id": t.id + tag,
                        "user_id": t.user_id + tag,
                        "session_id": t.session_id + tag,
                    }
                )
            )
        copy += 1
    return out


def shape_turns(source: Sequence[TurnIn], shape: str, limit: int) -> list[TurnIn]:
    """`limit` turns of `source` (copied as needed) in the order `shape` sends them.
    Each user's turns keep their order in every shape."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; one of {', '.join(SHAPES)}")
    if not source:
        return []
    turns = _copies(source, limit)
    if shape == "sequential":
        return turns
    if shape == "heavy":
        return [
            t.model_copy(
                update={"user_id": HEAVY_USER, "session_id": f"{t.user_id}/{t.session_id}"}
            )
            for t in turns
        ]
    by_user: dict[str, list[TurnIn]] = {}
    for t in turns:
        by_user.setdefault(t.user_id, []).append(t)
    return [t for row in zip_longest(*by_user.values()) for t in row if t is not None]
