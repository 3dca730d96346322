"""The search playground's explanation, pipeline health, dead-letter replay, and the
console with auth disabled."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.settings import get_settings
from memwell.intake.dead_letters import list_dead_letters, record_dead_letter
from memwell.intake.raw_letters import raw_payload
from memwell.maintenance.batches import JobReport
from memwell.maintenance.runs import RUNS_KEY, record_run
from tests.console.helpers import Keys, Story, signed_in
from worker.undecodable import UNREADABLE_TASK

FACTS = (
    "The user's favourite colour is green.",
    "The user works night shifts as a nurse.",
    "The user's dog is called Biscuit.",
)
HIT = re.compile(
    r'<li class="hit (kept|dropped)" data-similarity="([-\d.]+)" data-text-rank="([-\d.]+)"'
)


@pytest.fixture
def facts(live_url: str, keys: Keys, ids: dict[str, str]) -> str:
    """Memories embedded by the API's own model, so the playground can find them."""
    response = httpx.post(
        f"{live_url}/v1/memories",
        headers={"Authorization": f"Bearer {keys.admin}"},
        json={"user_id": ids["user"], "memories": [{"content": c} for c in FACTS],
              "reconcile": False},
        timeout=60,
    )  # fmt: skip
    assert response.status_code == 200, response.text
    return ids["user"]


def test_search_shows_score_parts_and_what_the_floor_dropped(
    live_url: str, keys: Keys, facts: str
) -> None:
    params = {"user": facts, "q": "favourite colour", "floor": "0.35"}
    with signed_in(live_url, keys.read) as client:
        page = client.get("/console/search", params=params).text
    hits = [(kind, float(sim), float(rank)) for kind, sim, rank in HIT.findall(page)]
    kept = [h for h in hits if h[0] == "kept"]
    dropped = [h for h in hits if h[0] == "dropped"]
    assert kept and dropped
    assert all(sim >= 0.35 or rank > 0 for _, sim, rank in kept)
    assert all(sim < 0.35 and rank <= 0 for _, sim, rank in dropped)
    first = page.index('class="hit kept"')
    assert "favourite colour is green" in page[first : first + 3000]
    assert page.count('class="part-relevance"') == len(hits)


def test_search_results_alone_for_htmx(live_url: str, keys: Keys, facts: str) -> None:
    with signed_in(live_url, keys.read) as client:
        response = client.get(
            "/console/search", params={"user": facts, "q": "dog"}, headers={"HX-Request": "true"}
        )
    assert response.status_code == 200
    assert "<html" not in response.text
    assert "Biscuit" in response.text


def test_search_in_the_future_is_refused_clearly(live_url: str, keys: Keys, facts: str) -> None:
    with signed_in(live_url, keys.read) as client:
        response = client.get(
            "/console/search", params={"user": facts, "q": "dog", "as_of": "2999-01-01T00:00:00Z"}
        )
    assert response.status_code == 422
    assert "as_of is in the future" in response.text


def test_health_shows_the_tenants_dead_letters_and_job_runs(
    live_url: str, keys: Keys, story: Story
) -> None:
    job = f"test-job-{uuid.uuid4().hex[:8]}"
    client_redis = redis.Redis.from_url(get_settings().redis_url or "")
    report = JobReport(job=job, dry_run=False, batches=3, counts={"decayed": 42})
    record_run(client_redis, report, ended_at=datetime.now(UTC))
    try:
        with signed_in(live_url, keys.read) as client:
            page = client.get("/console/health").text
            workers = client.get("/console/health/workers")
    finally:
        client_redis.hdel(RUNS_KEY, job)
    assert f'data-id="{story.letter}"' in page
    assert "&lt;b&gt;boom&lt;/b&gt;" in page
    assert 'class="replay"' not in page  # a read key cannot replay
    assert re.search(rf"<td>{job}</td>.*?decayed 42", page, re.S)
    assert workers.status_code == 200 and "alive" in workers.text


def test_replay_is_for_admins_and_marks_the_letter(
    live_url: str, keys: Keys, story: Story, db: sessionmaker[Session]
) -> None:
    with signed_in(live_url, keys.read) as client:
        refused = client.post(
            f"/console/dead-letters/{story.letter}/replay",
            data={"csrf": client.cookies["mw_console_csrf"]},
        )
    assert refused.status_code == 403
    with signed_in(live_url, keys.admin) as client:
        done = client.post(
            f"/console/dead-letters/{story.letter}/replay",
            data={"csrf": client.cookies["mw_console_csrf"]},
        )
        assert done.headers["location"] == f"/console/health?replayed={story.letter}"
        page = client.get(done.headers["location"]).text
    assert f'data-id="{story.letter}"' not in page
    with db() as session:
        letters = list_dead_letters(session, include_replayed=True, tenant=keys.tenant)
    assert [d.replayed_at is not None for d in letters] == [True]


def test_another_tenant_neither_sees_nor_replays_a_letter(
    live_url: str, story: Story, make_key: object, db: sessionmaker[Session]
) -> None:
    assert callable(make_key)
    other = make_key(f"t-{uuid.uuid4().hex[:8]}", ("admin",))["Authorization"][7:]
    with signed_in(live_url, other) as client:
        page = client.get("/console/health").text
        client.post(
            f"/console/dead-letters/{story.letter}/replay",
            data={"csrf": client.cookies["mw_console_csrf"]},
        )
    assert f'data-id="{story.letter}"' not in page
    with db() as session:
        open_letters = list_dead_letters(session, limit=1000)
    assert story.letter in [d.id for d in open_letters]


@pytest.fixture(scope="module")
def open_console(stack_env: dict[str, str]) -> Iterator[TestClient]:
    """The app as `memwell up` runs it: auth disabled."""
    from api.main import create_app

    settings = get_settings().model_copy(update={"auth_disabled": True})
    with TestClient(create_app(settings), follow_redirects=False) as client:
        yield client


def test_with_auth_disabled_the_console_opens_without_a_key(open_console: TestClient) -> None:
    response = open_console.get("/console/users")
    assert response.status_code == 200
    assert "admin" in response.text
    assert "Sign out" not in response.text
    assert open_console.get("/console/login").headers["location"] == "/console"


def test_a_letter_kept_as_raw_bytes_has_no_replay_button(
    open_console: TestClient, db: sessionmaker[Session]
) -> None:
    """Its bytes are no task: the console says so instead of offering a replay."""
    with db.begin() as session:
        letter = record_dead_letter(
            session, task_name=UNREADABLE_TASK,
            payload=raw_payload(b"[]", {"queue": "ingest"}, max_bytes=1024),
            error="not a message: not a message envelope: an array",
        )  # fmt: skip
    page = open_console.get("/console/health").text
    row = re.search(rf'<tr class="letter" data-id="{letter}">.*?</tr>', page, re.S)
    assert row is not None
    assert "raw bytes: not replayable" in row.group(0)
    assert 'class="replay"' not in row.group(0)
