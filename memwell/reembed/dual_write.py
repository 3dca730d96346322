"""New memories while a re-embed is in flight (or finished), written in their user's model.

The write path (memwell/pipeline/writes.py) embeds with the process's configured
model. Here, just before the insert, each new row is moved to the model its user is
searched with (`routing`), and the other model of an in-flight re-embed gets its
vector beside it in `memory_embeddings`: a memory written mid-migration is then
searchable before and after its user switches, and abort or finish find it like
any other. The caller holds the users' advisory locks (reconcile's), which a switch
also takes, so a user cannot switch between this read and the insert.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from memwell.core.settings import get_settings
from memwell.embeddings import EmbeddingError
from memwell.reembed.routing import UserRoute, current_models, load_routes, route_user
from memwell.reembed.specs import EmbedderCache, TargetSpec

log = logging.getLogger(__name__)

_cache: EmbedderCache | None = None
_cache_lock = threading.Lock()


def embedders() -> EmbedderCache:
    """This process's embedders of re-embed targets (built on first use)."""
    global _cache
    with _cache_lock:
        if _cache is None:
            _cache = EmbedderCache(get_settings())
        return _cache


def _embed_groups(
    rows: list[dict[str, Any]], wanted: dict[int, TargetSpec]
) -> dict[int, np.ndarray]:
    """The vector of each row index in `wanted`, one batch per model. A model that
    fails is skipped, not raised: the rows keep the vector they came with, and the
    re-embed's catch-up (memwell/reembed/walk.py, `stragglers`) embeds them later.
    Writes must not stop because the target's endpoint is down."""
    by_spec: dict[TargetSpec, list[int]] = defaultdict(list)
    for idx, spec in wanted.items():
        by_spec[spec].append(idx)
    out: dict[int, np.ndarray] = {}
    for spec, idxs in by_spec.items():
        try:
            vectors = embedders().get(spec).embed([rows[i]["content"] for i in idxs])
        except EmbeddingError as exc:
            log.warning("re-embed dual write skipped %s: %s", spec.spec, exc)
            continue
        out.update(zip(idxs, vectors, strict=True))
    return out


def _plan(
    route: UserRoute, current: str | None, given_model: str
) -> tuple[TargetSpec | None, TargetSpec | None | str]:
    """(primary model, None: as given; side model: None, a spec, or "given")."""
    primary = route.model_for(current)
    primary_name = primary.model_name if primary is not None else given_model
    m = route.in_flight
    if m is None:
        return primary, None
    if primary_name == m.target.model_name:
        return primary, ("given" if given_model != primary_name else None)
    # An aborting re-embed drops its target's vectors: no point writing one.
    return primary, (m.target if m.state != "aborting" else None)


def route_new_rows(
    session: Session, rows: list[dict[str, Any]], given_model: str
) -> list[dict[str, Any]]:
    """Move `rows` (insert dicts of `memories`) to their users' models, in place; return
    the `memory_embeddings` rows to insert after them. No re-embed: nothing to do, and
    one small read."""
    routes = load_routes(session)
    if not routes:
        return []
    users = {(r["tenant"], r["user_id"]) for r in rows}
    route_of = {u: route_user(routes, *u) for u in users}
    current = current_models(session, [u for u, r in route_of.items() if r.in_flight])
    primaries: dict[int, TargetSpec] = {}
    sides: dict[int, TargetSpec] = {}
    given_sides: list[int] = []
    for i, row in enumerate(rows):
        key = (row["tenant"], row["user_id"])
        primary, side = _plan(route_of[key], current.get(key), given_model)
        if primary is not None and primary.model_name != given_model:
            primaries[i] = primary
        if side == "given":
            given_sides.append(i)
        elif isinstance(side, TargetSpec):
            sides[i] = side
    side_rows = [
        _side(rows[i], sides[i].model_name, vector)
        for i, vector in _embed_groups(rows, sides).items()
    ]
    moved = _embed_groups(rows, primaries)
    for i in given_sides:
        if i in moved:  # the vector it came with goes beside the target's
            side_rows.append(_side(rows[i], given_model, rows[i]["embedding"]))
    for i, vector in moved.items():
        rows[i]["embedding"] = vector
        rows[i]["embedding_model"] = primaries[i].model_name
    return side_rows


def _side(row: dict[str, Any], model: str, vector: Any) -> dict[str, Any]:
    return {
        "memory_id": row["id"],
        "model": model,
        "tenant": row["tenant"],
        "user_id": row["user_id"],
        "embedding": vector,
    }
