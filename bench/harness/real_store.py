"""Real conversations beside the synthetic store: figures 1 and 5 with LoCoMo text.

The LoCoMo conversations go through the real pipeline (`bench.harness.locomo_store`:
one user per conversation in the tenant `locomo`, consolidated by a real worker that is
stopped before anything is timed); then the synthetic store of figures 1 and 5 is
COPY-loaded beside them in the same table (tenant `bench`), so a LoCoMo user's search
runs in a table of `rows` + the LoCoMo memories, as on a shared service. Questions are
asked as the conversation's user, in an order that rotates users (each request's user
differs from the last one's, as in figure 1).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.figures.retrieval import load
from bench.harness.locomo_store import LocomoStore, locomo_store
from memwell.core.settings import Settings
from memwell.embeddings.factory import local_model_name
from memwell.embeddings.local_onnx import DIMENSIONS


@dataclass(frozen=True)
class Ask:
    user_id: str  # the LoCoMo sample id: one user per conversation
    question: str


def synthetic_user(i: int) -> str:
    return f"user-{i:05d}"


@contextmanager
def locomo_beside_synthetic(
    data: Path, *, rows: int, users: int, scopes: list[str] | None = None
) -> Iterator[LocomoStore]:
    """The LoCoMo users consolidated, then `rows` synthetic memories over `users` users
    loaded beside them (random unit vectors under the stored model's name, so a
    synthetic user's search scans its rows too), settled as figures 1 and 5 settle."""
    with locomo_store(data, scopes=scopes or ["admin"]) as store:
        if rows:
            rng = np.random.default_rng(7)
            owner = np.arange(rows) % users
            rng.shuffle(owner)
            model = local_model_name(Settings())
            print(f"loading {rows:,} synthetic memories over {users:,} users beside the "
                  f"LoCoMo ones ({model})", file=sys.stderr)  # fmt: skip
            load(store.stack.database_url, owner, DIMENSIONS, rng, model=model,
                 name=synthetic_user)  # fmt: skip
        yield store


def locomo_asks(store: LocomoStore, n: int) -> list[Ask]:
    """`n` distinct questions, users taken in turn (one question of each user, then the
    next of each), so consecutive requests never share a user; repeats when `n` exceeds
    the distinct questions (a repeat may then be answered by the query cache)."""
    per_user = [list(dict.fromkeys(q.text for q in c.questions)) for c in store.conversations]
    ordered: list[Ask] = []
    depth = max((len(qs) for qs in per_user), default=0)
    for i in range(depth):
        for conv, qs in zip(store.conversations, per_user, strict=True):
            if i < len(qs):
                ordered.append(Ask(conv.sample_id, qs[i]))
    if not ordered:
        raise SystemExit("the LoCoMo file holds no questions")
    return [ordered[i % len(ordered)] for i in range(n)]
