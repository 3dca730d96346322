"""Long-term retrieval in one SQL statement (see memwell/retrieval/sql.py for its text).

Candidates come from an exact scan over one user's visible rows (found by the
(tenant, user_id) btree) or, for a user above the ANN threshold, from that user's own
partial HNSW index plus full-text matches. The same statement re-ranks them by

    score     = w_rel * relevance + w_imp * importance + w_rec * recency
    relevance = cosine similarity fused with full-text rank (RRF or normalised scores)
                + w_entity * entity_match
    recency   = max(2^-(hours since creation / half_life_created),
                    2^-(hours since last access / half_life_access))

where entity_match (0..1) says how rare the entities are that the query names and the
memory is linked to, directly or through one relation (memwell/retrieval/entity_sql.py).
It cuts them by a similarity floor (a full-text or entity match passes it too) and
returns each hit's score parts and provenance, so a caller can see why it came back.
This module is the only retrieval path: chat, search and context all call `search`.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from memwell.core.errors import InvalidInput
from memwell.core.model_calibration import calibration_of, similarity_scale
from memwell.core.settings import Settings
from memwell.db.driver import fetch_all, fetch_all_async, pyformat
from memwell.db.read_pool import Statement, TenantReadPool
from memwell.entities.query import query_keys
from memwell.retrieval.sql import Fusion, StatementShape, build_statement

# Per-request overrides are clamped to these; a caller cannot make one part swamp the
# others by orders of magnitude or turn recency into noise.
WEIGHT_MAX = 5.0
HALF_LIFE_MIN_H = 0.1
HALF_LIFE_MAX_H = 24.0 * 365 * 10
K_MAX = 100
# The ANN path reads at most this many full-text matches per query term for each
# candidate it keeps (see retrieval_sql._ANN_IDS).
ANN_TERM_CAP_PER_CANDIDATE = 5
# A query names a handful of entities, or a class word standing for its few dozen
# members; a pasted document is not looked up name by name.
ENTITY_KEYS_MAX = 96


@dataclass(frozen=True)
class SearchFilters:
    """Optional narrowing of the candidates; every field left unset is no filter."""

    kinds: tuple[str, ...] | None = None
    metadata: dict[str, Any] | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    agent_id: str | None = None
    session_id: str | None = None
    exclude_ids: tuple[uuid.UUID, ...] | None = None

    def binds(self) -> dict[str, Any]:
        values: dict[str, Any] = {
            "kinds": list(self.kinds) if self.kinds else None,
            "metadata": json.dumps(self.metadata) if self.metadata else None,
            "created_after": self.created_after,
            "created_before": self.created_before,
            "agent_id": self.agent_id,
            "session_id": self.session_id,
            "exclude_ids": [str(i) for i in self.exclude_ids] if self.exclude_ids else None,
        }
        return {k: v for k, v in values.items() if v is not None}


@dataclass(frozen=True)
class SearchParams:
    """One search, fully resolved. Built by `params_from_settings` (the one place that
    reads the settings), so no field has a default that could disagree with them."""

    tenant: str
    user_id: str
    query_vector: np.ndarray
    embedding_model: str
    query_text: str
    k: int
    similarity_floor: float
    w_relevance: float
    w_importance: float
    w_recency: float
    half_life_h: float
    half_life_access_h: float
    fusion: Fusion
    text_weight: float
    rrf_k: int
    ann_k: int
    #: the clock of the recency terms (`as_of` when set)
    now: datetime
    filters: SearchFilters = field(default_factory=SearchFilters)
    #: set: answer as the store stood at this instant (historical visibility rules)
    as_of: datetime | None = None
    #: set when this user has a per-user ANN index (memwell/retrieval/ann.py)
    ann_dims: int | None = None
    #: the entity keys the query names; empty: no entity term (nor its lookups)
    entity_keys: tuple[str, ...] = ()
    entity_weight: float = 0.0
    #: a neighbour's share of its query entity's weight
    entity_hop: float = 0.0
    #: the ANN path's most entity-linked candidates
    entity_candidates: int = 0
    #: maps the model's cosine distance onto the reference model's before fusion
    similarity_scale: float = 1.0


@dataclass(frozen=True)
class Overrides:
    """Per-request tuning, each clamped to sane bounds; None keeps the setting."""

    w_relevance: float | None = None
    w_importance: float | None = None
    w_recency: float | None = None
    half_life_h: float | None = None
    half_life_access_h: float | None = None
    fusion: Fusion | None = None
    text_weight: float | None = None
    similarity_floor: float | None = None
    #: 0 turns the entity term off (the statement without it)
    entity_weight: float | None = None


class MemoryHit(BaseModel):
    """A retrieved memory and why it came back: score = w_rel*relevance +
    w_imp*importance + w_rec*recency; relevance fuses similarity (cosine) and text_rank,
    plus w_entity*entity_match.

    Every door returns this one shape (REST search, context and chat, MCP, the SDK)."""

    model_config = ConfigDict(frozen=True)

    id: uuid.UUID
    kind: str
    content: str
    score: float
    relevance: float
    importance: float
    recency: float
    similarity: float
    text_rank: float
    #: 0..1: how rare the query's entities linked to this memory are (0: none)
    entity_match: float = 0.0
    created_at: datetime
    session_id: str | None
    agent_id: str | None
    source_turn_ids: list[str]
    metadata: dict[str, Any]


def _clamp(value: float | None, default: float, low: float, high: float) -> float:
    return default if value is None else min(max(value, low), high)


def params_from_settings(
    settings: Settings,
    *,
    tenant: str,
    user_id: str,
    query_vector: np.ndarray,
    embedding_model: str,
    query_text: str = "",
    k: int | None = None,
    filters: SearchFilters | None = None,
    as_of: datetime | None = None,
    overrides: Overrides | None = None,
    ann_dims: int | None = None,
) -> SearchParams:
    """Search parameters from the settings, with per-request overrides clamped."""
    o = overrides or Overrides()
    now = datetime.now(UTC)
    if as_of is not None and as_of.tzinfo is None:
        as_of = as_of.replace(tzinfo=UTC)
    if as_of is not None and as_of > now:
        raise InvalidInput("as_of is in the future")
    entity_weight = _clamp(o.entity_weight, settings.entity_weight, 0.0, WEIGHT_MAX)
    # No weight, no lookups: the statement is then the one without the entity term.
    named = entity_weight > 0 and query_text.strip()
    keys = tuple(query_keys(query_text)[:ENTITY_KEYS_MAX]) if named else ()
    return SearchParams(
        tenant=tenant,
        user_id=user_id,
        query_vector=query_vector,
        embedding_model=embedding_model,
        query_text=query_text,
        k=min(max(k or settings.retrieval_top_k, 1), K_MAX),
        similarity_floor=_clamp(o.similarity_floor, _floor(settings, embedding_model), -1.0, 1.0),
        w_relevance=_clamp(o.w_relevance, settings.weight_relevance, 0.0, WEIGHT_MAX),
        w_importance=_clamp(o.w_importance, settings.weight_importance, 0.0, WEIGHT_MAX),
        w_recency=_clamp(o.w_recency, settings.weight_recency, 0.0, WEIGHT_MAX),
        half_life_h=_clamp(
            o.half_life_h, settings.recency_half_life_h, HALF_LIFE_MIN_H, HALF_LIFE_MAX_H
        ),
        half_life_access_h=_clamp(
            o.half_life_access_h,
            settings.access_half_life_h,
            HALF_LIFE_MIN_H,
            HALF_LIFE_MAX_H,
        ),
        fusion=o.fusion or settings.retrieval_fusion,
        text_weight=_clamp(o.text_weight, settings.text_weight, 0.0, 1.0),
        rrf_k=settings.rrf_k,
        filters=filters or SearchFilters(),
        as_of=as_of,
        now=as_of or now,
        ann_dims=ann_dims,
        ann_k=settings.ann_candidates,
        entity_keys=keys,
        entity_weight=entity_weight,
        entity_hop=settings.entity_hop_weight,
        entity_candidates=settings.entity_candidates,
        similarity_scale=similarity_scale(embedding_model),
    )


def _floor(settings: Settings, embedding_model: str) -> float:
    """The floor of the model the user's rows are in (during a re-embed walk, not always
    this process's model), unless the operator set one."""
    calibration = calibration_of(embedding_model)
    if calibration is None or "similarity_floor" in settings.model_fields_set:
        return settings.similarity_floor
    return calibration.similarity_floor


def vector_literal(vector: np.ndarray) -> str:
    """pgvector's text form; exact for float32 and cheaper to build than a binary adapter."""
    return "[" + ",".join(f"{x:.7g}" for x in vector.tolist()) + "]"


def _bind(params: SearchParams) -> tuple[str, dict[str, Any]]:
    filter_binds = params.filters.binds()
    entities = bool(params.entity_keys) and params.entity_weight > 0
    shape = StatementShape(
        fusion=params.fusion,
        historical=params.as_of is not None,
        filters=frozenset(filter_binds),
        ann_dims=params.ann_dims,
        entities=entities,
    )
    binds: dict[str, Any] = {
        "query": np.asarray(params.query_vector, dtype=np.float32),
        "qtext": params.query_text,
        "tenant": params.tenant,
        "user_id": params.user_id,
        "model": params.embedding_model,
        "k": params.k,
        "floor": params.similarity_floor,
        "sim_scale": params.similarity_scale,
        "w_rel": params.w_relevance,
        "w_imp": params.w_importance,
        "w_rec": params.w_recency,
        "hl_created": params.half_life_h,
        "hl_access": params.half_life_access_h,
        "text_weight": params.text_weight if params.query_text else 0.0,
        "rrf_k": params.rrf_k,
        "now": params.as_of or params.now,
        "ann_k": params.ann_k,
        "term_cap": params.ann_k * ANN_TERM_CAP_PER_CANDIDATE,
        **filter_binds,
    }
    if entities:
        binds |= {
            "ent_keys": list(params.entity_keys),
            "ent_weight": params.entity_weight,
            "ent_hop": params.entity_hop,
            "ent_cap": params.entity_candidates,
        }
    return build_statement(shape), binds


def _hit(row: Any) -> MemoryHit:
    # The row comes from our own statement: no validation on the chat path.
    return MemoryHit.model_construct(
        id=row.id,
        kind=row.kind,
        content=row.content,
        score=float(row.score),
        relevance=float(row.relevance),
        importance=float(row.importance),
        recency=float(row.recency),
        similarity=float(row.similarity),
        text_rank=float(row.text_rank),
        entity_match=float(row.entity_match),
        created_at=row.created_at,
        session_id=row.session_id,
        agent_id=row.agent_id,
        source_turn_ids=list(row.source_turn_ids),
        metadata=dict(row.metadata or {}),
    )


# HNSW returns at most ef_search rows per scan: the ANN path must ask for ann_k of them.
# And a custom plan: the user's index is partial (its predicate names the tenant, user
# and model), and a generic plan of a prepared statement cannot prove a parameter
# matches that predicate, so after psycopg's fifth execution Postgres silently fell
# back to scanning every row of the user (measured: slower than the exact path).
# SET LOCAL scopes both to this transaction; only the rare ANN user pays the round trip.
_EF_SEARCH_SQL = (
    "SELECT set_config('hnsw.ef_search', :ef, true) AS ef_search,"
    " set_config('plan_cache_mode', 'force_custom_plan', true) AS plan_cache_mode"
)
_EF_SEARCH = text(_EF_SEARCH_SQL)


def _ef(params: SearchParams) -> dict[str, str]:
    return {"ef": str(max(params.ann_k, 40))}


async def search(session: AsyncSession, params: SearchParams) -> list[MemoryHit]:
    """Top-k memories for the query, best first (async; the chat and REST paths)."""
    sql, binds = _bind(params)
    if params.ann_dims is not None:
        await session.execute(_EF_SEARCH, _ef(params))
    rows = await fetch_all_async(await session.connection(), sql, binds)
    return [_hit(r) for r in rows]


async def search_pooled(pool: TenantReadPool, params: SearchParams) -> list[MemoryHit]:
    """Same statement, with its settings, in one round trip (the API's request path)."""
    sql, binds = _bind(params)
    statements: list[Statement] = []
    if params.ann_dims is not None:
        statements.append((pyformat(_EF_SEARCH_SQL), _ef(params)))
    statements.append((sql, binds))
    return [_hit(r) for r in await pool.fetch_all(params.tenant, statements)]


def search_sync(session: Session, params: SearchParams) -> list[MemoryHit]:
    """Same statement for workers, the CLI and benchmarks."""
    sql, binds = _bind(params)
    if params.ann_dims is not None:
        session.execute(_EF_SEARCH, _ef(params))
    return [_hit(r) for r in fetch_all(session.connection(), sql, binds)]
