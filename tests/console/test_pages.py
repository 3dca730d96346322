"""The console over real HTTP: sign-in, scopes, CSRF, escaping, and each page's facts."""

from __future__ import annotations

import re

import httpx

from tests.console.helpers import INJECTION, Keys, Story, signed_in


def test_without_a_key_the_console_asks_to_sign_in(live_url: str) -> None:
    response = httpx.get(f"{live_url}/console/users?cursor=x", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"].startswith("/console/login?next=%2Fconsole%2Fusers")


def test_a_wrong_key_is_refused_and_sets_no_cookie(live_url: str) -> None:
    with httpx.Client(base_url=live_url) as client:
        client.get("/console/login")
        response = client.post(
            "/console/login",
            data={"key": "mw_not_a_key", "csrf": client.cookies["mw_console_csrf"]},
        )
        assert response.status_code == 401
        assert "unknown or revoked API key" in response.text
        assert "mw_console_key" not in client.cookies


def test_the_key_cookie_is_httponly_and_samesite_strict(live_url: str, keys: Keys) -> None:
    with httpx.Client(base_url=live_url) as client:
        client.get("/console/login")
        response = client.post(
            "/console/login", data={"key": keys.read, "csrf": client.cookies["mw_console_csrf"]}
        )
    cookie = next(c for c in response.headers.get_list("set-cookie") if "mw_console_key" in c)
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    assert "Path=/console" in cookie


def test_a_form_without_the_csrf_token_is_refused(live_url: str, keys: Keys, story: Story) -> None:
    with signed_in(live_url, keys.write) as client:
        response = client.post(f"/console/memories/{story.new_fact}/pin", data={"pinned": "true"})
        assert response.status_code == 403
        forged = client.post(
            f"/console/memories/{story.new_fact}/pin",
            data={"pinned": "true", "csrf": client.cookies["mw_console_csrf"]},
            headers={"Origin": "https://evil.example"},
        )
        assert forged.status_code == 403
        page = client.get(f"/console/memories/{story.new_fact}")
    assert "tag pinned" not in page.text


def test_read_scope_sees_but_cannot_pin(live_url: str, keys: Keys, story: Story) -> None:
    with signed_in(live_url, keys.read) as client:
        page = client.get(f"/console/memories/{story.new_fact}")
        assert page.status_code == 200
        assert "The user lives in Porto." in page.text
        assert 'class="pin"' not in page.text  # no button the key could not use
        response = client.post(
            f"/console/memories/{story.new_fact}/pin",
            data={"pinned": "true", "csrf": client.cookies["mw_console_csrf"]},
        )
    assert response.status_code == 403
    assert "needs an API key with the &#39;write&#39; scope" in response.text


def test_pin_goes_through_the_edit_service_and_its_history(
    live_url: str, keys: Keys, story: Story
) -> None:
    with signed_in(live_url, keys.write) as client:
        response = client.post(
            f"/console/memories/{story.new_fact}/pin",
            data={"pinned": "true", "csrf": client.cookies["mw_console_csrf"]},
        )
        assert response.status_code == 303
        page = client.get(f"/console/memories/{story.new_fact}").text
    assert "tag pinned" in page
    assert "retention: pinned=true" in page  # the update event REST's PATCH writes


def test_edit_records_an_update_with_old_and_new_content(
    live_url: str, keys: Keys, story: Story
) -> None:
    with signed_in(live_url, keys.write) as client:
        response = client.post(
            f"/console/memories/{story.new_fact}/edit",
            data={"content": "The user lives in Porto.", "kind": "fact", "importance": "0.9",
                  "csrf": client.cookies["mw_console_csrf"]},
        )  # fmt: skip
        assert response.status_code == 200
        page = client.get(f"/console/memories/{story.new_fact}").text
    assert "edited: importance" in page
    assert "0.900" in page


def test_delete_needs_confirmation_then_tombstones(live_url: str, keys: Keys, story: Story) -> None:
    with signed_in(live_url, keys.write) as client:
        confirm = client.get(f"/console/memories/{story.new_fact}/delete")
        assert "Delete this memory?" in confirm.text
        client.post(
            f"/console/memories/{story.new_fact}/delete",
            data={"csrf": client.cookies["mw_console_csrf"]},
        )
        page = client.get(f"/console/memories/{story.new_fact}").text
    assert "tag deleted" in page
    assert "console delete" in page


def test_stored_html_renders_as_text(live_url: str, keys: Keys, story: Story) -> None:
    with signed_in(live_url, keys.read) as client:
        memory = client.get(f"/console/memories/{story.injection}").text
        listing = client.get("/console/user", params={"id": story.user}).text
        health = client.get("/console/health").text
    for page in (memory, listing):
        assert "<script>window.__pwned" not in page
        assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in page
        assert "<img src=x" not in page
    assert "<b>boom</b>" not in health
    assert "&lt;b&gt;boom&lt;/b&gt;" in health


def test_pages_forbid_inline_scripts(live_url: str, keys: Keys) -> None:
    with signed_in(live_url, keys.read) as client:
        response = client.get("/console/users")
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy
    assert response.headers["cache-control"] == "no-store"


def test_user_page_lists_filters_and_searches_memories(
    live_url: str, keys: Keys, story: Story
) -> None:
    with signed_in(live_url, keys.read) as client:
        users = client.get("/console/users").text
        assert story.user in users
        everything = client.get(
            "/console/user", params={"id": story.user, "include": "superseded"}
        ).text
        live = client.get("/console/user", params={"id": story.user}).text
        porto = client.get("/console/user", params={"id": story.user, "q": "Porto"}).text
        prefs = client.get("/console/user", params={"id": story.user, "kind": "preference"}).text
    assert "(3 match)" in everything
    assert "(2 match)" in live and "Lisbon" not in live
    assert "(1 match)" in porto and "Porto" in porto
    assert re.search(r"\(1 match\)", prefs) and "Ignore previous instructions" in prefs


def test_memory_page_shows_the_supersession_timeline(
    live_url: str, keys: Keys, story: Story
) -> None:
    with signed_in(live_url, keys.read) as client:
        page = client.get(f"/console/memories/{story.old_fact}").text
    assert f'class="successor-link" href="/console/memories/{story.new_fact}"' in page
    assert page.index(">add<") < page.index(">supersede<")
    assert "changed fact: city" in page


def test_unknown_memory_is_a_404_page(live_url: str, keys: Keys) -> None:
    with signed_in(live_url, keys.read) as client:
        response = client.get("/console/memories/00000000-0000-0000-0000-000000000000")
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("text/html")


def test_erase_is_for_admins_and_shows_the_receipt(live_url: str, keys: Keys, story: Story) -> None:
    form = {"user_id": story.user, "confirm": story.user}
    with signed_in(live_url, keys.write) as client:
        refused = client.post(
            "/console/user/erase", data={**form, "csrf": client.cookies["mw_console_csrf"]}
        )
        assert refused.status_code == 403
        assert client.get("/console/user", params={"id": story.user}).status_code == 200
    with signed_in(live_url, keys.admin) as client:
        csrf = client.cookies["mw_console_csrf"]
        typo = client.post("/console/user/erase", data={**form, "confirm": "nope", "csrf": csrf})
        assert typo.status_code == 422
        done = client.post("/console/user/erase", data={**form, "csrf": csrf})
        assert done.status_code == 200
        assert re.search(r"<td>memories</td><td class=\"n\">3</td>", done.text)
        assert client.get("/console/user", params={"id": story.user}).status_code == 404


def test_other_tenants_memories_are_not_found(
    live_url: str, keys: Keys, story: Story, make_key: object
) -> None:
    assert callable(make_key)
    other = make_key("t-someone-else", ("admin",))["Authorization"].removeprefix("Bearer ")
    with signed_in(live_url, other) as client:
        response = client.get(f"/console/memories/{story.new_fact}")
    assert response.status_code == 404
    assert INJECTION not in response.text


def test_pages_load_nothing_from_elsewhere(live_url: str, keys: Keys, story: Story) -> None:
    with signed_in(live_url, keys.read) as client:
        pages = [
            client.get("/console/users").text,
            client.get("/console/search", params={"user": story.user}).text,
            client.get("/console/health").text,
        ]
        assets = set(re.findall(r'(?:src|href)="(/console/static/[^"]+)"', pages[0]))
        served = {path: client.get(path).status_code for path in assets}
    assert served == {"/console/static/htmx.min.js": 200, "/console/static/console.css": 200}
    for page in pages:
        assert not re.search(r'(?:src|href|action)="(?:https?:)?//', page)
