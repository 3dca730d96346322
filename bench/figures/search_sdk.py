"""Search through the Python SDK with real questions, against the floors it is made of.

    python -m bench.figures.search_sdk [--data PATH] [--questions 300] [--json PATH]

The LoCoMo dev conversations are consolidated through the real pipeline (one user per
conversation, a few hundred memories each: bench/harness/locomo_store.py), then the
API (`python -m memwell api`, one uvicorn process, local mode) answers their questions
through `MemoryClient.search`, one client, one request at a time, after a warm-up.
Each question's user differs from the last one's, and no question repeats, so the
query cache never answers.

Per question, interleaved with the request so all see the same machine, the floors
are measured from this process:
  - the query embedding at batch 1, by the embedder the API builds (same precision,
    one intra-op thread);
  - the search statement alone, as the service runs it (`search_pooled`: the same
    SQL through the same read pool and driver) with that vector;
  - GET /healthz through the SDK's own HTTP client: what HTTP, uvicorn and the
    client cost with no work behind them.

Goal: client-observed p50 <= 1.3x and p95 <= 1.5x (query embedding + search statement).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

from bench.evals.locomo import TENANT
from bench.harness.api_server import serve_api
from bench.harness.chat_stack import API_ENV
from bench.harness.common import percentile, print_table
from bench.harness.headline import ReportRow, add_json_flag, figure_main
from bench.harness.host import describe_host, host_block
from bench.harness.locomo_data import Conversation
from bench.harness.locomo_store import LocomoStore, locomo_store
from bench.harness.stack import LOCOMO_DEFAULT
from memwell.core.settings import Settings
from memwell.db.read_pool import TenantReadPool
from memwell.embeddings import build_embedder
from memwell.retrieval.search import params_from_settings, search_pooled
from memwell.sdk import MemoryClient

GOAL_P50, GOAL_P95 = 1.3, 1.5
K = 10
CLIENT = "client-observed search (SDK)"
EMBED = "floor: query embedding, batch 1"
STATEMENT = "floor: search statement (read pool)"
FLOOR_SUM = "floors: embedding + statement"
HEALTHZ = "GET /healthz (SDK's HTTP client)"
OVER = "client minus floors (per request)"

T = TypeVar("T")


@dataclass(frozen=True)
class SearchSdkHeadline:
    """Search through the SDK with LoCoMo questions, and the floors it is held against."""

    questions: int
    users: int
    memories_per_user: int
    client_p50_ms: float
    client_p95_ms: float
    embed_p50_ms: float
    embed_p95_ms: float
    statement_p50_ms: float
    statement_p95_ms: float
    floor_p50_ms: float
    floor_p95_ms: float
    healthz_p50_ms: float
    healthz_p95_ms: float
    host: str

    @property
    def ratio_p50(self) -> float:
        return self.client_p50_ms / self.floor_p50_ms

    @property
    def ratio_p95(self) -> float:
        return self.client_p95_ms / self.floor_p95_ms

    def report_row(self) -> ReportRow:
        return ReportRow(
            figure=f"search via the SDK, {self.questions} LoCoMo questions, {self.users} users "
            f"(~{self.memories_per_user} memories each)",
            measured=f"p50 {self.client_p50_ms:.1f} / p95 {self.client_p95_ms:.1f} ms "
            f"({self.ratio_p50:.2f}x / {self.ratio_p95:.2f}x the floors)",
            baseline=f"query embedding + search statement p50 {self.floor_p50_ms:.1f} / "
            f"p95 {self.floor_p95_ms:.1f} ms; /healthz p50 {self.healthz_p50_ms:.1f} / "
            f"p95 {self.healthz_p95_ms:.1f} ms",
            goal=f"p50 <= {GOAL_P50:g}x, p95 <= {GOAL_P95:g}x the floors",
        )


@dataclass(frozen=True)
class Ask:
    user_id: str
    question: str


def questions(conversations: Sequence[Conversation]) -> list[Ask]:
    """Every distinct question, round robin over the users (each one's user differs
    from the last one's); a text asked twice would be answered by the query cache."""
    seen: set[str] = set()
    out: list[Ask] = []
    queues = [[q.text for q in c.questions] for c in conversations]
    for i in range(max((len(q) for q in queues), default=0)):
        for conv, texts in zip(conversations, queues, strict=True):
            if i < len(texts) and texts[i] not in seen:
                seen.add(texts[i])
                out.append(Ask(conv.sample_id, texts[i]))
    return out


def _timed(fn: Callable[[], T]) -> tuple[float, T]:
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1000, out


def measure(store: LocomoStore, asks: Sequence[Ask], warmup: int) -> dict[str, list[float]]:
    """Each question through the SDK, then its floors; returns ms per row name."""
    settings = Settings(embedding_provider="local")
    # Built as the API builds its own (memwell/retrieval/service.py), minus cache and meter.
    embedder = build_embedder(settings, for_queries=True)
    model = embedder.model_name
    samples: dict[str, list[float]] = {CLIENT: [], EMBED: [], STATEMENT: [], HEALTHZ: []}
    same = 0
    with asyncio.Runner() as runner, serve_api(store.stack, env=API_ENV) as api:
        pool = TenantReadPool(store.stack.database_url)
        runner.run(pool.open())

        async def statement(ask: Ask, vector: object) -> tuple[float, list[str]]:
            params = params_from_settings(
                settings, tenant=TENANT, user_id=ask.user_id, query_vector=vector,  # type: ignore[arg-type]
                embedding_model=model, query_text=ask.question, k=K,
            )  # fmt: skip
            t0 = time.perf_counter()
            hits = await search_pooled(pool, params)
            return (time.perf_counter() - t0) * 1000, [str(h.id) for h in hits]

        try:
            with MemoryClient(api.url, api_key=store.api_key) as mw:
                http = mw._http  # the SDK's own connection, for the HTTP floor
                embedder.embed(["warm up"])
                for n, ask in enumerate(asks):
                    client_ms, result = _timed(
                        partial(mw.search, user_id=ask.user_id, query=ask.question, k=K)
                    )
                    embed_ms, vectors = _timed(partial(embedder.embed, [ask.question]))
                    sql_ms, ids = runner.run(statement(ask, vectors[0]))
                    health_ms, response = _timed(partial(http.get, "/healthz"))
                    response.raise_for_status()
                    if n < warmup:
                        continue
                    same += ids == [h.id for h in result.hits]
                    for name, ms in ((CLIENT, client_ms), (EMBED, embed_ms),
                                     (STATEMENT, sql_ms), (HEALTHZ, health_ms)):  # fmt: skip
                        samples[name].append(ms)
                    if (n - warmup + 1) % 50 == 0:
                        print(f"  {n - warmup + 1}/{len(asks) - warmup} questions",
                              file=sys.stderr)  # fmt: skip
        finally:
            runner.run(pool.close())
    measured = len(asks) - warmup
    print(f"  the API's top {K} equals the statement floor's for {same}/{measured} questions",
          file=sys.stderr)  # fmt: skip
    return samples


def summarize(samples: dict[str, list[float]]) -> dict[str, tuple[float, float]]:
    """p50/p95 per row, with the floors' sum and the per-request overhead."""
    q = {name: (percentile(v, 50), percentile(v, 95)) for name, v in samples.items()}
    floors = (q[EMBED][0] + q[STATEMENT][0], q[EMBED][1] + q[STATEMENT][1])
    over = [c - e - s for c, e, s in zip(samples[CLIENT], samples[EMBED], samples[STATEMENT],
                                         strict=True)]  # fmt: skip
    return {
        CLIENT: q[CLIENT],
        EMBED: q[EMBED],
        STATEMENT: q[STATEMENT],
        FLOOR_SUM: floors,
        HEALTHZ: q[HEALTHZ],
        OVER: (percentile(over, 50), percentile(over, 95)),
    }


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=LOCOMO_DEFAULT, help="LoCoMo-format JSON")
    p.add_argument("--questions", type=int, default=300, help="questions timed")
    p.add_argument("--warmup", type=int, default=20, help="questions asked first, not counted")
    add_json_flag(p)
    return p


def headline(argv: list[str] | None = None) -> SearchSdkHeadline | None:
    """Run the figure, print its table, return its headline (None: no data)."""
    a = _parser().parse_args(argv)
    if not a.data.exists():
        print(f"skipped: LoCoMo data not found at {a.data} (pass --data PATH)")
        return None
    host = describe_host()
    print(f"host: {host}", file=sys.stderr)
    with locomo_store(a.data) as store:
        asks = questions(store.conversations)
        if len(asks) < a.warmup + a.questions:
            print(f"  only {len(asks)} distinct questions: timing {len(asks) - a.warmup}",
                  file=sys.stderr)  # fmt: skip
        # The warm-up questions come from the end: none of them is timed again.
        timed = asks[: min(a.questions, len(asks) - a.warmup)]
        warm = asks[len(timed) :][: a.warmup]
        samples = measure(store, [*warm, *timed], len(warm))
        per_user = sorted(store.memories.values())
    rows = summarize(samples)
    floor = rows[FLOOR_SUM]
    client = rows[CLIENT]
    users = len(per_user)
    typical = per_user[len(per_user) // 2] if per_user else 0
    print(f"\nsearch through the SDK, {len(timed)} LoCoMo questions over {users} users "
          f"({min(per_user, default=0)}-{max(per_user, default=0)} memories each), k={K}, "
          "one client, one request at a time (ms)")  # fmt: skip
    print(host_block())
    table = [[name, f"{p50:.2f}", f"{p95:.2f}"] for name, (p50, p95) in rows.items()]
    table.append(["ratio: client / floors", f"{client[0] / floor[0]:.2f}x",
                  f"{client[1] / floor[1]:.2f}x"])  # fmt: skip
    print_table(["row", "p50", "p95"], table)
    ok50, ok95 = client[0] <= GOAL_P50 * floor[0], client[1] <= GOAL_P95 * floor[1]
    print(f"goal: p50 <= {GOAL_P50:g}x -> {'met' if ok50 else 'NOT met'}; "
          f"p95 <= {GOAL_P95:g}x -> {'met' if ok95 else 'NOT met'}")  # fmt: skip
    # Every cross-process hop of the request waits for a core: a busy host stretches
    # the client's time more than the floors'.
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return SearchSdkHeadline(
        questions=len(timed), users=users, memories_per_user=typical,
        client_p50_ms=client[0], client_p95_ms=client[1],
        embed_p50_ms=rows[EMBED][0], embed_p95_ms=rows[EMBED][1],
        statement_p50_ms=rows[STATEMENT][0], statement_p95_ms=rows[STATEMENT][1],
        floor_p50_ms=floor[0], floor_p95_ms=floor[1],
        healthz_p50_ms=rows[HEALTHZ][0], healthz_p95_ms=rows[HEALTHZ][1], host=host,
    )  # fmt: skip


def main() -> int:
    return figure_main(headline, _parser())


if __name__ == "__main__":
    raise SystemExit(main())
