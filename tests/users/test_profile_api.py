"""GET /v1/users/{id}/profile: the current value of every slot by entity, with its
provenance, and the top entities with their current relations in both directions;
superseded values and facts of forgotten memories left out; nothing of another
tenant; an unknown user is a 404 as in GET /v1/users/{id}."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from memwell.local.cli import main
from tests.support.memory_factory import add_memory, unit
from tests.support.problems import assert_problem
from tests.support.profile_factory import (
    SeededProfile,
    add_entity,
    add_relation,
    seed_profile,
)

Headers = dict[str, str]


@pytest.fixture
def seeded(db: sessionmaker[Session], ids: dict[str, str]) -> SeededProfile:
    with db.begin() as session:
        seeded = seed_profile(session, tenant=ids["tenant"], user_id=ids["user"])
        # Another tenant's user of the same id, whose Caroline lives in Paris.
        other: dict[str, Any] = {"tenant": ids["tenant"] + "-other", "user_id": ids["user"]}
        caroline = add_entity(session, **other, name="Caroline", mention_count=50)
        add_relation(
            session, **other, subject_id=caroline, relation="lives_in", value="Paris",
            single_valued=True,
        )  # fmt: skip
    return seeded


def _profile(api: TestClient, user: str, headers: Headers, **params: Any) -> dict[str, Any]:
    response = api.get(f"/v1/users/{user}/profile", params=params, headers=headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _edges(entity: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(r["direction"], r["relation"], r["value"]) for r in entity["relations"]]


def test_the_profile_shows_current_slots_with_provenance_and_hides_superseded_ones(
    api: TestClient,
    seeded: SeededProfile,
    ids: dict[str, str],
    make_key: Callable[..., Headers],
) -> None:
    profile = _profile(api, ids["user"], make_key(ids["tenant"], ("read",)))
    assert profile["user_id"] == ids["user"]
    assert [(f["name"], f["kind"], sorted(f["slots"])) for f in profile["facts"]] == [
        ("Caroline", "person", ["age", "lives_in"]),  # not drives: its memory was forgotten
        ("Ana", "person", ["works_at"]),
    ]
    lives_in = profile["facts"][0]["slots"]["lives_in"]
    assert lives_in == {
        "relation_id": str(seeded.lives_in), "value": "Boston",
        "value_entity_id": str(seeded.boston), "memory_id": str(seeded.boston_memory),
        "source_turn_ids": ["turn-boston"], "valid_from": "2026-01-13T09:00:00Z",
    }  # fmt: skip
    age = profile["facts"][0]["slots"]["age"]
    assert (age["value"], age["value_entity_id"]) == ("34", None)
    assert "Berlin" not in str(profile["facts"])


def test_top_entities_come_with_their_current_relations_both_ways(
    api: TestClient,
    seeded: SeededProfile,
    ids: dict[str, str],
    make_key: Callable[..., Headers],
) -> None:
    key = make_key(ids["tenant"], ("read",))
    entities = _profile(api, ids["user"], key)["entities"]
    # By mentions, then the most recently seen: Berlin (seen last) before Acme.
    assert [(e["name"], e["mention_count"]) for e in entities] == [
        ("Caroline", 5), ("Ana", 3), ("Boston", 2), ("Berlin", 1), ("Acme", 1)
    ]  # fmt: skip
    by_name = {e["name"]: e for e in entities}
    assert _edges(by_name["Caroline"]) == [  # newest first
        ("out", "lives_in", "Boston"), ("out", "sister", "Ana"), ("out", "age", "34")
    ]  # fmt: skip
    assert _edges(by_name["Ana"]) == [("in", "sister", "Caroline"), ("out", "works_at", "Acme")]
    assert by_name["Ana"]["relations"][0]["value_entity_id"] == str(seeded.caroline)
    assert by_name["Ana"]["relations"][0]["single_valued"] is False
    assert _edges(by_name["Boston"]) == [("in", "lives_in", "Caroline")]
    assert _edges(by_name["Berlin"]) == []  # only a superseded edge reaches it

    small = _profile(api, ids["user"], key, entities_limit=2, relations_limit=1)
    assert [(e["name"], _edges(e)) for e in small["entities"]] == [
        ("Caroline", [("out", "lives_in", "Boston")]),
        ("Ana", [("in", "sister", "Caroline")]),
    ]
    assert len(small["facts"]) == 2  # the limits bound entities, not slots
    facts_only = _profile(api, ids["user"], key, entities_limit=0)
    assert facts_only["entities"] == [] and facts_only["facts"]


def test_nothing_of_another_tenant_and_an_unknown_user_is_a_404(
    api: TestClient,
    seeded: SeededProfile,
    db: sessionmaker[Session],
    ids: dict[str, str],
    make_key: Callable[..., Headers],
) -> None:
    tenant, user = ids["tenant"], ids["user"]
    other = _profile(api, user, make_key(tenant + "-other", ("read",)))
    assert [(f["name"], f["slots"]["lives_in"]["value"]) for f in other["facts"]] == [
        ("Caroline", "Paris")
    ]
    assert [e["name"] for e in other["entities"]] == ["Caroline"]
    stranger = make_key(tenant + "-stranger", ("read",))
    assert_problem(api.get(f"/v1/users/{user}/profile", headers=stranger), 404, "not-found")
    key = make_key(tenant, ("read",))
    assert_problem(api.get("/v1/users/nobody/profile", headers=key), 404, "not-found")
    # A user with memories and no entities yet has an empty profile, not a 404.
    with db.begin() as session:
        add_memory(session, tenant=tenant, user_id="plain", content="hi", embedding=unit(0.5))
    assert _profile(api, "plain", key) == {"user_id": "plain", "facts": [], "entities": []}


def test_limits_are_checked_and_a_user_id_may_end_in_profile(
    api: TestClient,
    db: sessionmaker[Session],
    ids: dict[str, str],
    make_key: Callable[..., Headers],
) -> None:
    key = make_key(ids["tenant"], ("read",))
    with db.begin() as session:
        seed_profile(session, tenant=ids["tenant"], user_id="ann/profile")
    for params in ({"entities_limit": 101}, {"relations_limit": -1}, {"limit": 3}):
        response = api.get("/v1/users/ann%2Fprofile/profile", params=params, headers=key)
        assert_problem(response, 422, "invalid-input")
    # The id "ann/profile" sent escaped is the user, not the profile of "ann".
    detail = api.get("/v1/users/ann%2Fprofile", headers=key)
    assert detail.status_code == 200 and detail.json()["memory_count"] == 4, detail.text
    profile = _profile(api, "ann%2Fprofile", key)
    assert profile["user_id"] == "ann/profile" and profile["facts"]
    assert_problem(api.get("/v1/users/ann/profile", headers=key), 404, "not-found")


def test_the_cli_prints_the_same_profile_and_one_line_for_an_unknown_user(
    api: TestClient,
    seeded: SeededProfile,
    ids: dict[str, str],
    make_key: Callable[..., Headers],
    stack_env: dict[str, str],
) -> None:
    over_rest = _profile(api, ids["user"], make_key(ids["tenant"], ("read",)), entities_limit=3)
    runner = CliRunner()
    printed = runner.invoke(
        main,
        ["profile", ids["user"], "--tenant", ids["tenant"], "--entities-limit", "3"],
        env=stack_env,
    )
    assert printed.exit_code == 0, printed.output
    assert json.loads(printed.stdout) == over_rest
    unknown = runner.invoke(main, ["profile", "nobody", "--tenant", ids["tenant"]], env=stack_env)
    assert unknown.exit_code != 0
    assert "not found" in unknown.output and "Traceback" not in unknown.output
