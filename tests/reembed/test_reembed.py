"""Re-embed on the real stack: Postgres, Redis, a dedicated Celery worker on the
maintenance queue, and the fake OpenAI-compatible endpoint as a 768-d target model.

The worker is killed with SIGKILL twice mid-walk and restarted; beat's tick re-sends
the step. Searches run for every user throughout; a memory written mid-run gets both
vectors; `finish` leaves only the target's vectors; `abort` leaves the store as it was.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.settings import get_settings
from memwell.embeddings import build_embedder
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from memwell.reembed.lifecycle import (
    abort_migration,
    finish_migration,
    get_status,
    start_migration,
    tick,
)
from memwell.reembed.progress import MigrationStatus
from memwell.reembed.sender import step_sender
from tests.support.fake_openai import FakeOpenAI
from tests.support.killed_workers import kill_worker
from tests.support.reembed_factories import (
    ANN_THRESHOLD,
    LOCAL,
    TARGET,
    TARGET_DIMS,
    fake_target,
    models_of,
    seed,
    side_rows,
    snapshot,
    write,
)


def _start(
    sessions: sessionmaker[Session], redis_url: str, fake: FakeOpenAI, tenant: str, rate: float
) -> MigrationStatus:
    spec, embedder = fake_target(fake.base_url)
    return start_migration(
        sessions,
        target=spec,
        embedder=embedder,
        tenant=tenant,
        user_id=None,
        batch_size=100,
        rate_per_s=rate,
        dispatch=step_sender(redis_url),
    )


def _status(sessions: sessionmaker[Session], migration_id: int) -> MigrationStatus:
    return get_status(sessions, migration_id=migration_id)


def _every_user_finds(search: Any, tenant: str, users: list[str]) -> None:
    for user_id in users:
        hits = search(tenant, user_id, "enjoys tea and chess")
        assert hits, f"no result for {user_id} ({tenant})"


def _kill_and_restart(
    worker: WorkerProcess, sessions: sessionmaker[Session], redis_url: str, migration_id: int
) -> None:
    kill_worker(worker, redis_url)  # its step goes back to the queue now, not in an hour
    worker.start()
    # What beat's tick does for a chain whose worker died (stale_after 0: now).
    tick(sessions, stale_after=timedelta(0), dispatch=step_sender(redis_url))
    assert _status(sessions, migration_id).state == "running"


def test_reembed_survives_sigkill_and_finish_keeps_only_the_target(
    maintenance_worker: WorkerProcess,
    sessions: sessionmaker[Session],
    tenant_sessions: sessionmaker[Session],
    fake_768: FakeOpenAI,
    search: Any,
    redis_url: str,
    ids: dict[str, str],
) -> None:
    tenant = ids["tenant"]
    users = {"ana": 120, "bo": 90, "cy": 150, "big": ANN_THRESHOLD}
    seed(tenant_sessions, tenant, users)
    total = sum(users.values())
    assert models_of(sessions, tenant) == {(LOCAL, 384): total}

    # Slow enough (about 34 s) that both kills land mid-walk on a busy host: the session's
    # shared worker also consumes the maintenance queue, so the walk goes on while the
    # killed worker restarts, and a restart under load can take many seconds.
    started = _start(sessions, redis_url, fake_768, tenant, rate=40.0)
    assert started.total == total
    mid = started.id

    for fraction in (0.25, 0.55):
        wait_for(
            lambda f=fraction: _status(sessions, mid).embedded >= f * total,
            timeout=120,
            what=f"{fraction:.0%} of the walk",
        )
        _kill_and_restart(maintenance_worker, sessions, redis_url, mid)
        _every_user_finds(search, tenant, list(users))

    # A memory written mid-run, by the write path with the local model's vector.
    local = build_embedder(get_settings())
    late = "ana note late: enjoys tea at dawn"
    write(tenant_sessions, tenant=tenant, user_id="ana", contents=[late],
          vectors=local.embed([late]), model=local.model_name)  # fmt: skip

    wait_for(lambda: _status(sessions, mid).state == "ready", timeout=240, what="ready")
    _every_user_finds(search, tenant, list(users))
    assert models_of(sessions, tenant) == {(TARGET, TARGET_DIMS): total + 1}
    with sessions() as session:
        registered = session.execute(
            text("SELECT user_id, embedding_model, dims FROM memory_ann_indexes WHERE tenant = :t"),
            {"t": tenant},
        ).all()
    assert [tuple(r) for r in registered] == [("big", TARGET, TARGET_DIMS)]
    # Until finish, every memory keeps its previous vector beside the new one.
    assert side_rows(sessions, tenant) == total + 1

    _, embedder = fake_target(fake_768.base_url)
    finish_migration(
        sessions, embedder=embedder, grace=timedelta(0), dispatch=step_sender(redis_url)
    )
    wait_for(lambda: _status(sessions, mid).old_dropped_at is not None, timeout=60, what="the drop")
    assert side_rows(sessions, tenant) == 0
    assert models_of(sessions, tenant) == {(TARGET, TARGET_DIMS): total + 1}
    _every_user_finds(search, tenant, list(users))
    assert search(tenant, "ana", "tea at dawn")[0].content == late


def test_abort_restores_the_start_state(
    maintenance_worker: WorkerProcess,
    sessions: sessionmaker[Session],
    tenant_sessions: sessionmaker[Session],
    fake_768: FakeOpenAI,
    search: Any,
    redis_url: str,
    ids: dict[str, str],
) -> None:
    tenant = ids["tenant"]
    users = {"dee": 150, "eli": 150, "fay": 150}
    seed(tenant_sessions, tenant, users)
    before = snapshot(sessions, tenant)

    mid = _start(sessions, redis_url, fake_768, tenant, rate=150.0).id
    wait_for(lambda: _status(sessions, mid).switched_users >= 1, timeout=120, what="a switch")
    _every_user_finds(search, tenant, list(users))

    abort_migration(sessions, dispatch=step_sender(redis_url))
    wait_for(lambda: _status(sessions, mid).state == "aborted", timeout=120, what="aborted")
    assert snapshot(sessions, tenant) == before
    assert side_rows(sessions, tenant) == 0
    _every_user_finds(search, tenant, list(users))
