"""Redis memory of active sessions: fill a fresh Valkey's buffers through the real buffer
code (memwell/buffer/session_buffer.py, the chat path's append script) and read INFO used_memory."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import redis

from bench.figures.retrieval import TENANT
from bench.harness.chat_stack import chat_bodies
from bench.harness.progress import progress
from memwell.buffer.session_buffer import SyncSessionBuffer
from memwell.core.settings import Settings
from memwell.llm.recall import LABEL
from memwell.local.embedded import EmbeddedRedis

#: What the recall responder answers with three memories: the assistant turn's size.
REPLY = (
    LABEL + "\nHere is what I remember that seems relevant:\n"
    "- The user moved to Lisbon last spring with their sister. (score 0.61, 2024-03-02)\n"
    "- The user plays the piano every evening after work. (score 0.48, 2024-02-11)\n"
    "- The user is training for a marathon in October. (score 0.44, 2024-01-20)"
)


@dataclass(frozen=True)
class SessionFill:
    sessions: int
    turns_per_session: int
    mean_tokens: float
    empty_mb: float
    full_mb: float

    @property
    def per_1000_mb(self) -> float:
        return (self.full_mb - self.empty_mb) / self.sessions * 1000


def _used_mb(client: redis.Redis) -> float:
    return float(client.info("memory")["used_memory"]) / 2**20


def _fill(client: redis.Redis, *, sessions: int, exchanges: int) -> float:
    """Append `exchanges` user+assistant pairs to each session; returns mean tokens held."""
    settings = Settings()
    buffer = SyncSessionBuffer(
        client, token_budget=settings.buffer_token_budget, ttl_s=settings.buffer_ttl_s
    )
    bodies = chat_bodies(sessions * exchanges, users=sessions, per_session=exchanges)
    now = datetime.now(UTC).isoformat()
    with progress("filling buffers", len(bodies)) as bar:
        for n, body in enumerate(bodies):
            pair = [
                buffer.make_turn(turn_id=f"t{n}-{role}", role=role, content=text, created_at=now)
                for role, text in (("user", body["message"]), ("assistant", REPLY))
            ]
            buffer.append(TENANT, body["user_id"], body["session_id"], pair)
            if n % 1000 == 999 or n == len(bodies) - 1:
                bar.update(n + 1)
    session_ids = {(b["user_id"], b["session_id"]) for b in bodies}
    totals = [buffer.read(TENANT, u, s).total_tokens for u, s in session_ids]
    return sum(totals) / len(totals)


def fill_sessions(root: Path, *, sessions: int, exchanges: int) -> SessionFill:
    """Measure a fresh Valkey before and after filling `sessions` buffers."""
    server = EmbeddedRedis(data_dir=root / "redis-sessions", appendonly=False)
    try:
        client = redis.Redis.from_url(server.start())
        empty = _used_mb(client)
        mean_tokens = _fill(client, sessions=sessions, exchanges=exchanges)
        full = _used_mb(client)
        client.close()
    finally:
        server.stop()
        shutil.rmtree(root / "redis-sessions", ignore_errors=True)
    return SessionFill(sessions, 2 * exchanges, mean_tokens, empty, full)
