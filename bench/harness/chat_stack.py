"""What the chat benchmarks share: a loaded store, an API key, the served API, requests.

The store holds random unit vectors under the local embedder's model name, so the chat
path's retrieval scans every row of the asking user (the exact per-user path); their
texts share words with the messages below, so full-text matches return hits and the
context really gets assembled.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from bench.figures.retrieval import TENANT, WORDS, load
from bench.harness.api_server import ApiProcess, serve_api
from bench.harness.stack import BenchStack, services
from memwell.auth.keys import create_key
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.embeddings.local_onnx import DIMENSIONS, MODEL_NAME

#: The limiter stays on the path (its Redis round trip is part of every request), but a
#: single benchmark key at hundreds of requests/s must never be refused.
API_ENV = {"MEMWELL_RATE_LIMIT_PER_S": "1000000", "MEMWELL_RATE_LIMIT_BURST": "1000000"}
#: Messages per session: each exchange appends two turns, so the buffer grows and, with
#: the recall responder's long replies, starts evicting (and sending summaries).
TURNS_PER_SESSION = 10
TEMPLATES = (
    "Remind me what I told you about {a} and {b}, it was day {i} I think.",
    "I just got back from {a} practice, my {b} plans for week {i} are still open.",
    "Do you remember anything about my {a}? Something changed with {b} on day {i}.",
    "Can you help me plan {a} for Saturday {i}? Last time {b} went badly.",
)


@dataclass(frozen=True)
class ChatStack:
    stack: BenchStack
    api: ApiProcess
    headers: dict[str, str]
    rows: int
    users: int


def user_name(i: int) -> str:
    return f"user-{i:05d}"


def load_store(stack: BenchStack, *, rows: int, users: int, seed: int = 7) -> float:
    """`rows` memories spread evenly over `users` users, interleaved; returns rows/s."""
    rng = np.random.default_rng(seed)
    owner = np.arange(rows) % users
    rng.shuffle(owner)
    print(f"loading {rows:,} memories over {users:,} users", file=sys.stderr)
    return load(stack.database_url, owner, DIMENSIONS, rng, model=MODEL_NAME, name=user_name)


def admin_headers(database_url: str) -> dict[str, str]:
    """A real admin key of the benchmark tenant, created as `memwell keys create` does."""
    engine = make_engine(database_url, pool_size=1)
    try:
        with make_sessionmaker(engine).begin() as session:
            created = create_key(session, tenant=TENANT, name="bench", scopes=["admin"])
    finally:
        engine.dispose()
    return {"Authorization": f"Bearer {created.key}"}


@contextmanager
def chat_stack(*, rows: int, users: int, api_workers: int = 1) -> Iterator[ChatStack]:
    """Postgres + Valkey with the store loaded, and the API serving it (no worker:
    the chat path only enqueues, and the outbox needs nothing but Valkey as broker)."""
    with services() as stack:
        load_store(stack, rows=rows, users=users)
        headers = admin_headers(stack.database_url)
        with serve_api(stack, workers=api_workers, env=API_ENV) as api:
            yield ChatStack(stack=stack, api=api, headers=headers, rows=rows, users=users)


def chat_bodies(
    n: int, *, users: int, start: int = 0, per_session: int = TURNS_PER_SESSION
) -> list[dict[str, str]]:
    """`n` distinct chat requests (no two share a message, so the query cache never
    answers); sessions of `per_session` messages, interleaved, spread over users."""
    sessions = max(1, -(-n // per_session))
    bodies = []
    for k in range(n):
        i = start + k
        s = start + k % sessions
        template = TEMPLATES[i % len(TEMPLATES)]
        message = template.format(a=WORDS[i % len(WORDS)], b=WORDS[(i * 7 + 3) % len(WORDS)], i=i)
        user = user_name((s * 7919) % users)
        bodies.append({"user_id": user, "session_id": f"{user}-s{s}", "message": message})
    return bodies
