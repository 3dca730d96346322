"""The query embedder of each search: the default one, or a re-embed's target's.

The list of re-embeds is cached per tenant for `ROUTES_TTL_S` (no user switches
sooner than twice that after a start: memwell/reembed/step.py); while one is in
flight for the user, the user's model is read from one of their rows (one more
small read per search, only then), so a switch is seen by the next search.
"""

from __future__ import annotations

import threading
import time

from memwell.core.settings import Settings
from memwell.db.read_pool import TenantReadPool
from memwell.embeddings import CachedQueryEmbedder
from memwell.embeddings.metered import MeteredEmbedder
from memwell.reembed.routing import (
    ROUTES_SQL,
    ROUTES_TTL_S,
    USER_MODEL_SQL,
    Route,
    route_from_row,
    route_user,
)
from memwell.reembed.specs import TargetSpec, build_target_embedder


class QueryModels:
    def __init__(self, settings: Settings, *, ttl_s: float = ROUTES_TTL_S) -> None:
        self.settings = settings
        self.ttl_s = ttl_s
        self._routes: dict[str, tuple[float, list[Route]]] = {}
        self._embedders: dict[TargetSpec, CachedQueryEmbedder] = {}
        self._lock = threading.Lock()

    async def target_for(
        self, reads: TenantReadPool, tenant: str, user_id: str
    ) -> TargetSpec | None:
        """The model to embed this user's query with; None: the default."""
        loaded_at, routes = self._routes.get(tenant, (float("-inf"), []))
        if time.monotonic() - loaded_at > self.ttl_s:
            rows = await reads.fetch_all(tenant, [(ROUTES_SQL, {})])
            routes = [route_from_row(r) for r in rows]
            self._routes[tenant] = (time.monotonic(), routes)
        if not routes:
            return None
        route = route_user(routes, tenant, user_id)
        current = None
        if route.in_flight is not None:
            rows = await reads.fetch_all(
                tenant, [(USER_MODEL_SQL, {"tenant": tenant, "user_id": user_id})]
            )
            current = rows[0][0] if rows else None
        return route.model_for(current)

    def embedder_for(self, target: TargetSpec) -> CachedQueryEmbedder:
        with self._lock:
            if target not in self._embedders:
                inner = build_target_embedder(self.settings, target, for_queries=True)
                self._embedders[target] = CachedQueryEmbedder(
                    MeteredEmbedder(inner, use="query"), capacity=self.settings.query_cache_size
                )
            return self._embedders[target]
