"""The console's fixtures: the real API on a loopback port, keys by scope, a headless
Chromium driven by Playwright, and a user whose memories tell a small story.

The browser is the system's Chromium (Debian's `chromium`): nothing downloads one at
test time. Without it, the browser tests skip and say how to install it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import insert, update
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import Memory, MemoryEvent
from memwell.intake.dead_letters import record_dead_letter
from tests.console.helpers import INJECTION, Keys, Story, chromium_path
from tests.support.live_api import serve_api
from tests.support.memory_factory import add_memory


@pytest.fixture(scope="session")
def live_url(stack_env: dict[str, str]) -> Iterator[str]:
    with serve_api() as url:
        yield url


@pytest.fixture
def keys(make_key: Callable[..., dict[str, str]], ids: dict[str, str]) -> Keys:
    """One key per scope, all of a fresh tenant."""

    def secret(*scopes: str) -> str:
        return make_key(ids["tenant"], scopes)["Authorization"].removeprefix("Bearer ")

    # A write key without read could edit but not see: keys are made with both.
    return Keys(ids["tenant"], secret("read"), secret("read", "write"), secret("admin"))


def _vector(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=8).astype(np.float32)
    return v / np.linalg.norm(v)


@pytest.fixture
def story(db: sessionmaker[Session], keys: Keys, ids: dict[str, str]) -> Story:
    tenant, user = keys.tenant, ids["user"]
    created = datetime.now(UTC) - timedelta(days=2)
    with db.begin() as s:
        old = add_memory(
            s, tenant=tenant, user_id=user, content="The user lives in Lisbon.",
            embedding=_vector(1), created_at=created, session_id=ids["session"],
        )  # fmt: skip
        new = add_memory(
            s, tenant=tenant, user_id=user, content="The user lives in Porto.",
            embedding=_vector(2), created_at=created + timedelta(days=1),
        )  # fmt: skip
        bad = add_memory(
            s, tenant=tenant, user_id=user, content=INJECTION, embedding=_vector(3),
            kind="preference",
        )  # fmt: skip
        s.execute(update(Memory).where(Memory.id == old).values(superseded_by=new))
        s.execute(
            insert(MemoryEvent),
            [
                _event(tenant, user, old, "add", new_content="The user lives in Lisbon."),
                _event(tenant, user, new, "add", new_content="The user lives in Porto."),
                _event(
                    tenant, user, old, "supersede", related=new, reason="changed fact: city",
                    old_content="The user lives in Lisbon.", new_content="The user lives in Porto.",
                ),
            ],
        )  # fmt: skip
        letter = record_dead_letter(
            s, task_name="memwell.sweep_pending", payload={}, tenant=tenant,
            error="RuntimeError: <b>boom</b> while consolidating", attempts=5,
        )  # fmt: skip
    return Story(user=user, old_fact=old, new_fact=new, injection=bad, letter=letter)


def _event(
    tenant: str, user: str, memory: uuid.UUID, event: str, *, related: uuid.UUID | None = None,
    reason: str | None = None, old_content: str | None = None, new_content: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    return {
        "tenant": tenant, "user_id": user, "memory_id": memory, "event": event,
        "related_memory_id": related, "reason": reason, "old_content": old_content,
        "new_content": new_content, "source_turn_ids": [],
    }  # fmt: skip


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """A headless Chromium: the system's, driven by Playwright (never downloaded)."""
    path = chromium_path()
    if path is None:
        pytest.skip(
            "no Chromium installed: `apt-get install -y chromium` (Debian/Ubuntu), or set "
            "MEMWELL_CHROMIUM to a Chromium binary"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=path, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        yield browser
        browser.close()
