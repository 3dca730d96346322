"""The console in a real headless Chromium: the walk an operator takes, from sign-in
to erasing a user, and proof that stored markup never runs.

With MEMWELL_CONSOLE_SCREENSHOTS=<dir> the walk also saves the console page's screenshots
there (`docs/console`), with a live worker so the pipeline page shows one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.console.helpers import INJECTION, Keys, Story

FACTS = (
    "The user's favourite colour is green.",
    "The user works night shifts as a nurse.",
    "The user is allergic to peanuts.",
    "The user's dog is called Biscuit.",
)


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Path | None:
    target = os.environ.get("MEMWELL_CONSOLE_SCREENSHOTS")
    if not target:
        return None
    request.getfixturevalue("worker")
    path = Path(target)
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(20_000)
    yield tab
    context.close()


def sign_in(page: Any, base: str, key: str, then: str = "/console/users") -> None:
    page.goto(f"{base}{then}")
    page.fill("input[name=key]", key)
    page.click("button[type=submit]")
    page.wait_for_url(f"**{then}")


def shoot(page: Any, shots: Path | None, name: str) -> None:
    if shots is not None:
        page.screenshot(path=str(shots / f"{name}.png"), full_page=True)


def test_an_operator_walks_through_the_console(
    page: Any, live_url: str, keys: Keys, story: Story, shots: Path | None
) -> None:
    from playwright.sync_api import expect

    added = httpx.post(
        f"{live_url}/v1/memories",
        headers={"Authorization": f"Bearer {keys.admin}"},
        json={"user_id": story.user, "memories": [{"content": c, "importance": 0.4 + i / 10}
              for i, c in enumerate(FACTS)], "reconcile": False},
        timeout=60,
    )  # fmt: skip
    assert added.status_code == 200, added.text

    # Sign in, pick the user.
    sign_in(page, live_url, keys.admin)
    shoot(page, shots, "users")
    page.click(f"a.user-link:text-is('{story.user}')")
    expect(page.locator("h1")).to_contain_text(story.user)
    expect(page.locator("table.memories")).to_contain_text("favourite colour is green")
    shoot(page, shots, "user")

    # Open the superseded memory and follow its timeline to the successor.
    page.check("input[name=include][value=superseded]")
    page.click("form.filters button[type=submit]")
    page.click("a.memory-link:text-is('The user lives in Lisbon.')")
    timeline = page.locator("ol.timeline li")
    expect(timeline).to_have_count(2)
    expect(timeline.nth(1).locator(".event-name")).to_have_text("supersede")
    expect(timeline.nth(1)).to_contain_text("changed fact: city")
    shoot(page, shots, "memory")
    page.click("a.successor-link")
    expect(page.locator("blockquote.memory-content")).to_have_text("The user lives in Porto.")

    # Search, and see each hit's score parts and what the floor dropped.
    page.click("nav >> text=Search")
    page.fill("input[name=user]", story.user)
    page.fill("input[name=q]", "peanuts")
    page.click("details summary")
    page.fill("input[name=floor]", "0.4")
    page.click("form.search-form button[type=submit]")
    first = page.locator("li.hit.kept").first
    expect(first).to_contain_text("allergic to peanuts")
    relevance = first.locator("svg.scorebar rect.part-relevance")
    assert float(relevance.get_attribute("width") or 0) > 0
    expect(page.locator("li.hit.dropped").first).to_be_visible()
    assert "q=peanuts" in page.url and "floor=0.4" in page.url  # a shareable URL
    shoot(page, shots, "search")

    # Replay the dead letter from the pipeline page.
    page.click("nav >> text=Pipeline")
    row = page.locator(f"tr.letter[data-id='{story.letter}']")
    expect(row).to_contain_text("<b>boom</b>")
    expect(page.locator(".workers-alive")).to_be_visible()
    shoot(page, shots, "pipeline")
    row.locator("button.replay").click()
    expect(page.locator(".notice")).to_have_text(f"Replayed dead letter {story.letter}.")
    expect(page.locator(f"tr.letter[data-id='{story.letter}']")).to_have_count(0)

    # Erase the user, as admin, and read the receipt.
    page.goto(f"{live_url}/console/user?id={story.user}")
    page.click("a.danger:text('Erase user')")
    page.fill("input[name=confirm]", story.user)
    page.click("button.danger")
    expect(page.locator("h1")).to_contain_text("erased")
    expect(page.locator("table.receipt")).to_contain_text("memories")
    shoot(page, shots, "erased")


def test_a_read_only_key_is_refused_erasure(
    page: Any, live_url: str, keys: Keys, story: Story
) -> None:
    from playwright.sync_api import expect

    sign_in(page, live_url, keys.read, then=f"/console/user/erase?id={story.user}")
    page.fill("input[name=confirm]", story.user)
    page.click("button.danger")
    expect(page.locator("p.error")).to_contain_text("needs an API key with the 'admin' scope")
    page.goto(f"{live_url}/console/user?id={story.user}")
    expect(page.locator("h1")).to_contain_text(story.user)
    expect(page.locator("a.danger")).to_have_count(0)  # no erase link for this key


def test_stored_markup_shows_as_text_and_never_runs(
    page: Any, live_url: str, keys: Keys, story: Story
) -> None:
    from playwright.sync_api import expect

    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    sign_in(page, live_url, keys.read, then=f"/console/memories/{story.injection}")
    expect(page.locator("blockquote.memory-content")).to_have_text(INJECTION)
    content = page.locator("blockquote.memory-content")
    assert content.locator("img").count() == 0 and content.locator("script").count() == 0
    page.goto(f"{live_url}/console/user?id={story.user}")
    expect(page.locator("table.memories")).to_contain_text("Ignore previous instructions")
    assert page.evaluate("window.__pwned") is None
    assert dialogs == []
