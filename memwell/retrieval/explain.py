"""Why a memory was recalled, or missed: `retrieve` as it answers, plus what the
similarity floor dropped, with the weights that made each score.

Both runs go through `retrieve`, so the explanation cannot rank differently from the
search it explains. Neither marks its hits accessed: looking at a search must not
make its hits more recent.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np

from memwell.retrieval.search import MemoryHit, Overrides, SearchFilters, params_from_settings
from memwell.retrieval.service import RetrievalDeps, embed_query, query_embedder, retrieve

#: The lowest similarity there is: with it, the floor lets every candidate through.
NO_FLOOR = -1.0


@dataclass(frozen=True)
class SearchExplanation:
    """The hits as retrieval returns them, and the best candidates the floor cut."""

    hits: list[MemoryHit]
    #: under the floor, with no full-text or entity match to pass it; best first
    dropped: list[MemoryHit]
    floor: float
    w_relevance: float
    w_importance: float
    w_recency: float
    #: the weight of entity_match inside the relevance
    w_entity: float

    @property
    def max_score(self) -> float:
        """The score of a perfect memory: every part at 1."""
        return self.w_relevance + self.w_importance + self.w_recency


async def explain_search(
    deps: RetrievalDeps,
    *,
    tenant: str,
    user_id: str,
    query: str,
    k: int | None = None,
    filters: SearchFilters | None = None,
    as_of: datetime | None = None,
    overrides: Overrides | None = None,
) -> SearchExplanation:
    """The search's hits with their score parts, and the ones its floor dropped."""
    # The floor is the calibration of the model the user's memories are in (during a
    # re-embed, not always this process's), as retrieval resolves it.
    embedder = await query_embedder(deps, tenant, user_id)
    # The weights and floor as retrieval resolves them (the vector plays no part).
    resolved = params_from_settings(
        deps.settings, tenant=tenant, user_id=user_id, query_vector=np.zeros(1),
        embedding_model=embedder.model_name, as_of=as_of, overrides=overrides,
    )  # fmt: skip
    quiet = replace(deps, access=None)

    async def run(chosen: Overrides | None) -> list[MemoryHit]:
        return await retrieve(
            quiet, tenant=tenant, user_id=user_id, query=query, k=k, filters=filters,
            as_of=as_of, overrides=chosen,
        )  # fmt: skip

    # Embed once (the query cache then serves both runs), and run both at once: each
    # takes its own pooled connection, so the page costs about one search, not two.
    await embed_query(deps, query, embedder)
    hits, everything = await asyncio.gather(
        run(overrides), run(replace(overrides or Overrides(), similarity_floor=NO_FLOOR))
    )
    kept = {h.id for h in hits}
    floor = resolved.similarity_floor
    dropped = [
        h
        for h in everything
        if h.id not in kept and h.similarity < floor and h.text_rank <= 0 and h.entity_match <= 0
    ]
    return SearchExplanation(
        hits=hits, dropped=dropped, floor=floor, w_relevance=resolved.w_relevance,
        w_importance=resolved.w_importance, w_recency=resolved.w_recency,
        w_entity=resolved.entity_weight,
    )  # fmt: skip
