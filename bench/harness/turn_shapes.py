"""The data shapes the consolidation bench feeds its workers (`--shape`).

- interleaved: many users' conversations at once, turn by turn in round robin, as a
  busy service receives them;
- sequential: one conversation after another, as an import (or one busy user at a
  time) sends them;
- heavy: every turn from one user: a long-lived assistant, an imported history.

The source conversations are copied under new ids (turn, user and session) until
there are `users` of them (LoCoMo dev has 5; 15 users is the source copied three
times), and each contributes its first turns, `limit` in all, as evenly as it can.
`heavy` gives `limit` turns, of as many copies as that takes, all to one user.

The k-th of a conversation's c copies starts k/c of the way into it (the turns before
come last): copies taking their first turns at once would send the same texts side by
side, which the embedder embeds once per call (memwell/embeddings/local_onnx.py), so
the raw embedder's rate, and the pipeline's, would count work they never did.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import zip_longest

from memwell.intake.turns import TurnIn

SHAPES = ("interleaved", "sequential", "heavy")
HEAVY_USER = "heavy-user"


def _copies(source: Sequence[TurnIn], users: int) -> dict[str, list[TurnIn]]:
    """Each conversation's turns in order, copied until there are `users` of them."""
    base: dict[str, list[TurnIn]] = {}
    for t in source:
        base.setdefault(t.user_id, []).append(t)
    names = list(base)
    count = dict.fromkeys(names, 0)  # copies of each conversation
    for i in range(users):
        count[names[i % len(names)]] += 1
    out: dict[str, list[TurnIn]] = {}
    copy = 0
    while len(out) < users:
        for user, turns in base.items():
            if len(out) == users:
                break
            tag = f"-copy{copy}" if copy else ""
            start = copy * len(turns) // count[user]
            out[user + tag] = [
                t.model_copy(
                    update={"id": t.id + tag, "user_id": user + tag,
                            "session_id": t.session_id + tag}
                )
                for t in turns[start:] + turns[:start]
            ]  # fmt: skip
        copy += 1
    return out


def _take(by_user: dict[str, list[TurnIn]], limit: int) -> dict[str, list[TurnIn]]:
    """The first turns of each user, `limit` in all, spread as evenly as they allow."""
    share = {u: 0 for u in by_user}
    left = min(limit, sum(len(t) for t in by_user.values()))
    while left:
        for u, turns in by_user.items():
            if left and share[u] < len(turns):
                share[u] += 1
                left -= 1
    return {u: turns[: share[u]] for u, turns in by_user.items() if share[u]}


def shape_turns(
    source: Sequence[TurnIn], shape: str, limit: int, *, users: int = 15
) -> list[TurnIn]:
    """`limit` turns of `users` conversations (copied as needed) in the order `shape`
    sends them. Each user's turns keep their order in every shape."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; one of {', '.join(SHAPES)}")
    if not source:
        return []
    copies = _copies(source, max(1, users))
    if shape == "heavy":  # one user, however many conversations it takes
        while sum(len(t) for t in copies.values()) < limit:
            copies = _copies(source, len(copies) + 1)
    by_user = _take(copies, limit)
    if shape == "sequential":
        return [t for turns in by_user.values() for t in turns]
    if shape == "heavy":
        return [
            t.model_copy(
                update={"user_id": HEAVY_USER, "session_id": f"{t.user_id}/{t.session_id}"}
            )
            for turns in by_user.values()
            for t in turns
        ]
    return [t for row in zip_longest(*by_user.values()) for t in row if t is not None]
