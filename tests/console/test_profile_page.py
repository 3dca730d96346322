"""The console's profile page: the same profile as GET /v1/users/{id}/profile, current
facts with the memory that stated each, top entities with their current relations."""

from __future__ import annotations

import re

from sqlalchemy.orm import Session, sessionmaker

from tests.console.helpers import INJECTION, Keys, signed_in
from tests.support.profile_factory import add_entity, add_relation, seed_profile


def _section(page: str, heading: str) -> str:
    """The page's text from `heading` to the next h2 (or the end)."""
    start = page.index(heading)
    following = page.find("<h2>", start + len(heading))
    return page[start : following if following != -1 else len(page)]


def test_the_profile_page_shows_current_facts_and_entities_and_nothing_superseded(
    live_url: str, keys: Keys, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    user = ids["user"]
    with db.begin() as session:
        seeded = seed_profile(session, tenant=keys.tenant, user_id=user)
        shady = add_entity(session, tenant=keys.tenant, user_id=user, name=INJECTION)
        add_relation(
            session, tenant=keys.tenant, user_id=user, subject_id=seeded.ana,
            relation="knows", object_id=shady,
        )  # fmt: skip
        # The same user id in another tenant: its Caroline lives in Paris.
        other = {"tenant": keys.tenant + "-other", "user_id": user}
        caroline = add_entity(session, **other, name="Caroline", mention_count=50)
        add_relation(
            session, **other, subject_id=caroline, relation="lives_in", value="Paris",
            single_valued=True,
        )  # fmt: skip

    with signed_in(live_url, keys.read) as client:
        user_page = client.get("/console/user", params={"id": user}).text
        assert f"/console/user/profile?id={user}" in user_page
        response = client.get("/console/user/profile", params={"id": user})
        assert response.status_code == 200
        page = response.text
        missing = client.get("/console/user/profile", params={"id": user + "-nobody"})
        too_many = client.get("/console/user/profile", params={"id": user, "entities": 101})

    facts = _section(page, "Current facts")
    rows = re.findall(r'<tr class="fact">(.*?)</tr>', facts, re.S)
    cells = [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", r)).strip() for r in rows]
    # Entity (named on its first row), fact, value, since, the memory (and its turns).
    assert [c.removesuffix(" memory") for c in cells] == [
        "Caroline person age 34 2026-01-10 09:00:00",
        "lives_in Boston 2026-01-13 09:00:00 memory turn-boston",
        "Ana person works_at Acme 2026-01-10 09:00:00",
    ], cells
    assert "Berlin" not in facts  # superseded
    assert "red Mini" not in page  # its memory was forgotten
    assert "Paris" not in page  # another tenant's
    assert f'href="/console/memories/{seeded.boston_memory}"' in facts
    assert "turn-boston" in facts

    entities = _section(page, "Top entities")
    names = re.findall(r'<tr class="entity">\s*<td><b>(.*?)</b>', entities)
    assert names[:3] == ["Caroline", "Ana", "Boston"]
    assert "Caroline <code>sister</code> Ana" in entities
    assert "Caroline <code>lives_in</code> Boston" in entities  # seen from Boston too
    assert "<script>window.__pwned" not in page
    assert "Ana <code>knows</code> &lt;script&gt;window.__pwned = 1&lt;/script&gt;" in entities

    assert missing.status_code == 404
    assert too_many.status_code == 422
