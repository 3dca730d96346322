"""`memwell status`: what the stack is doing, for an operator, in one screen.

Queue depths and in-flight messages (Redis), workers alive (a Celery control ping),
the backlog's age (the oldest pending turn), open dead letters, store counts, and the
LLM-mode items handed to local mode in the last week, by step and reason; first,
where a foreign producer sends turns (the broker, its password masked, and the API).
Each part is read on its own: one service being down shows as such instead of
hiding the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.metrics import read_queue_depths
from memwell.core.queues import TASK_QUEUES, Queue, TaskName
from memwell.db.models import ChatSession, DeadLetter, Memory, MemoryEvent, Turn
from memwell.intake.dispatch import producer_app
from memwell.intake.raw_letters import open_raw_letters, raw_not_kept
from memwell.llm.model_server import probe_model_server
from memwell.reembed.progress import latest_progress


def masked_url(url: str) -> str:
    """`url` with its password shown as ***: the status screen gets pasted into tickets."""
    parts = urlsplit(url)
    # A sentinel:// URL may carry the sentinels' own password in its query.
    query = re.sub(r"(sentinel_password=)[^&]*", r"\1***", parts.query)
    parts = parts._replace(query=query)
    if parts.password is None:
        return urlunsplit(parts)
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user = userinfo.partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{hostport}"))


@dataclass
class StackStatus:
    broker_url: str = ""  # masked
    api_url: str = ""
    queues: dict[str, int] = field(default_factory=dict)
    unacked: int = 0
    workers: list[str] = field(default_factory=list)
    pending_turns: int = 0
    oldest_pending_s: float | None = None
    dead_letters_open: int = 0
    #: open letters of unreadable messages (bounded), and those not kept past the bound
    raw_letters_open: int = 0
    raw_letters_not_kept: int = 0
    last_dead_letter: str | None = None
    turns: dict[str, int] = field(default_factory=dict)
    memories_live: int = 0
    memories_deleted: int = 0
    memory_users: int = 0
    sessions: int = 0
    memory_events: int = 0
    #: the newest re-embed (memwell/reembed/), None when there never was one
    reembed: dict[str, Any] | None = None
    #: the local model server `memwell up` supervises (status, models, port), if any
    model_server: dict[str, Any] | None = None
    #: LLM mode's fallbacks to local mode in the last week: step -> reason -> items
    llm_fallbacks: dict[str, dict[str, int]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def for_stack(cls, *, broker_url: str, api_url: str) -> StackStatus:
        """An empty status naming the stack's URLs (the broker's password masked)."""
        return cls(broker_url=masked_url(broker_url), api_url=api_url)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# Both counts use partial indexes on the open rows.
_PENDING = select(func.count(), func.min(Turn.received_at)).where(Turn.status == "pending")
_OPEN_LETTERS = select(func.count()).select_from(DeadLetter).where(DeadLetter.replayed_at.is_(None))


_FALLBACKS = text(
    """
    SELECT u.stage, r.key, sum(r.value::bigint)
    FROM llm_usage u CROSS JOIN LATERAL jsonb_each_text(u.fallback_reasons) r
    WHERE u.day >= current_date - 6
    GROUP BY u.stage, r.key
    """
)


def _pending(row: Any) -> tuple[int, float | None]:
    count, oldest = row
    age = None if oldest is None else max(0.0, (datetime.now(UTC) - oldest).total_seconds())
    return int(count), age


def read_broker(status: StackStatus, redis_url: str, *, ping_timeout_s: float = 1.0) -> None:
    try:
        status.queues, status.unacked = read_queue_depths(redis_url, [q.value for q in Queue])
    except Exception as exc:  # shown, not raised: the rest of the screen still helps
        status.errors["redis"] = _reason(exc)
        return
    try:
        replies = producer_app(redis_url).control.ping(timeout=ping_timeout_s) or []
        status.workers = sorted(name for reply in replies for name in reply)
    except Exception as exc:
        status.errors["workers"] = _reason(exc)


def read_model_server(status: StackStatus, base_url: str) -> None:
    """Whether the stack's local model server answers, and with which model."""
    state = probe_model_server(base_url)
    status.model_server = state.as_dict()
    if not state.up:
        status.errors["model server"] = state.error or "down"


def read_store(status: StackStatus, sessions: sessionmaker[Session]) -> None:
    try:
        with sessions() as session:
            _read_store(status, session)
    except Exception as exc:
        status.errors["postgres"] = _reason(exc)


def _reason(exc: Exception) -> str:
    """The error's type and first line (drivers append hints and SQL on later lines)."""
    first = next((line for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {first.strip()}"


def _read_store(status: StackStatus, session: Session) -> None:
    status.turns = {
        s: int(n)
        for s, n in session.execute(select(Turn.status, func.count()).group_by(Turn.status))
    }
    status.pending_turns, status.oldest_pending_s = _pending(session.execute(_PENDING).one())
    live, deleted, users = session.execute(
        select(
            func.count().filter(Memory.deleted_at.is_(None)),
            func.count().filter(Memory.deleted_at.is_not(None)),
            func.count(func.distinct(func.concat(Memory.tenant, "/", Memory.user_id))),
        )
    ).one()
    status.memories_live, status.memories_deleted, status.memory_users = (
        int(live),
        int(deleted),
        int(users),
    )
    status.sessions = int(session.scalar(select(func.count()).select_from(ChatSession)) or 0)
    status.memory_events = int(session.scalar(select(func.count()).select_from(MemoryEvent)) or 0)
    status.dead_letters_open = int(session.scalar(_OPEN_LETTERS) or 0)
    status.raw_letters_open = open_raw_letters(session)
    not_kept = raw_not_kept(session)
    status.raw_letters_not_kept = not_kept.count if not_kept is not None else 0
    last = session.scalars(
        select(DeadLetter)
        .where(DeadLetter.replayed_at.is_(None))
        .order_by(DeadLetter.id.desc())
        .limit(1)
    ).first()
    status.reembed = latest_progress(session)
    for stage, reason, count in session.execute(_FALLBACKS):
        status.llm_fallbacks.setdefault(stage, {})[reason] = int(count)
    if last is not None:
        status.last_dead_letter = f"{last.created_at:%Y-%m-%d %H:%M:%S} {last.task_name}: " + (
            last.error.splitlines()[0][:120] if last.error else ""
        )


async def read_backlog(session: AsyncSession) -> tuple[int, float | None, int]:
    """Pending turns, the oldest one's age in seconds, and open dead letters (async:
    for the API's /metrics), by the same statements as `read_store`. Read them as the
    connecting role: the backlog is every tenant's."""
    pending, age = _pending((await session.execute(_PENDING)).one())
    return pending, age, int(await session.scalar(_OPEN_LETTERS) or 0)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "none (no pending turns)"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def render(status: StackStatus) -> str:
    """The status as plain text, one fact per line."""
    ingest = TaskName.INGEST_TURNS
    lines = [
        f"Broker          {status.broker_url or 'unknown'}",
        f"  producers send {ingest.value} to queue {TASK_QUEUES[ingest].value}",
        f"API             {status.api_url or 'unknown'}",
        "Queues (waiting / in flight)",
    ]
    for queue, depth in status.queues.items():
        lines.append(f"  {queue:<12} {depth:>8}")
    lines.append(f"  {'unacked':<12} {status.unacked:>8}")
    lines.append(f"Workers alive   {len(status.workers)}")
    lines += [f"  {name}" for name in status.workers]
    lines.append(
        f"Backlog         {status.pending_turns} pending turns, "
        f"oldest {_age(status.oldest_pending_s)}"
    )
    lines.append(f"Dead letters    {status.dead_letters_open} open")
    if status.raw_letters_open or status.raw_letters_not_kept:
        lines.append(
            f"  unreadable    {status.raw_letters_open} open, "
            f"{status.raw_letters_not_kept} more not kept (at their bound)"
        )
    if status.last_dead_letter:
        lines.append(f"  last: {status.last_dead_letter}")
    turns = ", ".join(f"{k} {v}" for k, v in sorted(status.turns.items())) or "none"
    lines.append("Store")
    lines.append(f"  turns         {sum(status.turns.values())} ({turns})")
    lines.append(
        f"  memories      {status.memories_live} live, {status.memories_deleted} deleted, "
        f"{status.memory_users} users"
    )
    lines.append(f"  sessions      {status.sessions}")
    lines.append(f"  history       {status.memory_events} memory events")
    if status.reembed is not None:
        lines.append(_reembed_line(status.reembed))
    if status.model_server is not None:
        lines.append(_model_server_line(status.model_server))
    if status.llm_fallbacks:
        lines.append("LLM fallbacks   items handed to local mode, last 7 days")
        for stage, reasons in sorted(status.llm_fallbacks.items()):
            by_reason = ", ".join(f"{r} {n}" for r, n in sorted(reasons.items()))
            lines.append(f"  {stage:<12} {by_reason}")
    for part, error in status.errors.items():
        lines.append(f"UNAVAILABLE {part}: {error}")
    return "\n".join(lines)


def _model_server_line(m: dict[str, Any]) -> str:
    models = ", ".join(m["models"]) or "no model"
    return f"Model server    {m['status']}: {models} on port {m['port']} ({m['url']})"


def _reembed_line(r: dict[str, Any]) -> str:
    scope = "/".join(x for x in (r["tenant"], r["user_id"]) if x) or "every tenant"
    done = 100 * min(1.0, r["embedded"] / r["total"]) if r["total"] else 100.0
    return (
        f"Re-embed        #{r['id']} to {r['target_spec']} ({scope}): {r['state']}, "
        f"{r['embedded']}/{r['total']} walked ({done:.0f}%), {r['switched_users']} users switched"
    )
