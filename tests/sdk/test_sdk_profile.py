"""The SDK's get_profile: the request it sends (the user id escaped as one segment, the
limits as query parameters, only when given) and the typed result it parses, keeping
fields a newer server adds. Against the real API: tests/agents/test_doors_parity.py."""

from __future__ import annotations

import httpx

import memwell

PROFILE = {
    "user_id": "u/1",
    "facts": [
        {
            "entity_id": "e1", "name": "Caroline", "kind": "person",
            "slots": {"lives_in": {"relation_id": "r1", "value": "Boston",
                                   "value_entity_id": "e2", "memory_id": "m1",
                                   "source_turn_ids": ["t1"],
                                   "valid_from": "2026-01-13T09:00:00Z"}},
        }
    ],
    "entities": [
        {
            "entity_id": "e1", "name": "Caroline", "kind": "person", "mention_count": 5,
            "last_seen_at": "2026-01-10T09:00:00Z", "aliases": ["Caro"],
            "relations": [{"relation_id": "r2", "relation": "sister", "direction": "out",
                           "value": "Ana", "value_entity_id": "e3", "single_valued": False,
                           "memory_id": None, "source_turn_ids": [], "valid_from": None}],
        }
    ],
}  # fmt: skip


def _client(seen: list[httpx.Request]) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=PROFILE)

    return httpx.Client(base_url="http://sdk.test", transport=httpx.MockTransport(handler))


def test_get_profile_sends_the_documented_request_and_parses_the_answer() -> None:
    seen: list[httpx.Request] = []
    mw = memwell.MemoryClient(http_client=_client(seen))
    profile = mw.get_profile("u/1")
    limited = mw.get_profile("u/1", entities_limit=0, relations_limit=5)
    assert [(r.method, r.url.raw_path.decode()) for r in seen] == [
        ("GET", "/v1/users/u%2F1/profile"),
        ("GET", "/v1/users/u%2F1/profile?entities_limit=0&relations_limit=5"),
    ]
    assert profile == limited
    assert profile.facts[0].slots["lives_in"].value == "Boston"
    assert profile.facts[0].slots["lives_in"].source_turn_ids == ["t1"]
    caroline = profile.entities[0]
    assert (caroline.relations[0].direction, caroline.relations[0].value) == ("out", "Ana")
    assert caroline.model_extra == {"aliases": ["Caro"]}  # a newer server's field is kept
