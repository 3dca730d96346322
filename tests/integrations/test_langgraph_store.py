"""The LangGraph store against the live API: the same calls give what LangGraph's own
InMemoryStore gives; search is Memwell's retrieval; a compiled graph and LangMem's
memory tools use it; and a tenant sees only its own items."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langmem import create_manage_memory_tool, create_search_memory_tool
from typing_extensions import TypedDict

import memwell
from memwell.integrations.langgraph import MemwellStore
from tests.integrations.conftest import ClientOf

FACTS = [
    ("k1", {"content": "Ada plays the cello.", "topic": "music", "n": 1}),
    ("k2", {"content": "Ada is allergic to peanuts.", "topic": "food", "n": 2}),
    ("k3", {"content": "Ada listens to Bach every morning.", "topic": "music", "n": 3}),
]


def _fill(store: BaseStore, user: str) -> None:
    for key, value in FACTS:
        store.put((user, "memories"), key, value)
    store.put((user, "agents", "planner"), "p1", {"content": "Ada's trip to Oslo is in May."})


def _summary(items: list[Any]) -> set[tuple[tuple[str, ...], str, str]]:
    return {(i.namespace, i.key, i.value["content"]) for i in items}


def test_the_store_behaves_like_langgraphs_in_memory_store(
    client: memwell.MemoryClient, ids: dict[str, str]
) -> None:
    user = ids["user"]
    ours, theirs = MemwellStore(client), InMemoryStore()
    for store in (ours, theirs):
        _fill(store, user)
    ns = (user, "memories")

    for store in (ours, theirs):
        got = store.get(ns, "k2")
        assert got is not None and got.value == dict(FACTS[1][1]) and got.key == "k2"
        assert store.get(ns, "missing") is None
    # Not asked of InMemoryStore: its get makes the namespace it looks in.
    assert ours.get((user, "elsewhere"), "k2") is None

    def searched(store: BaseStore, **kw: Any) -> set[tuple[tuple[str, ...], str, str]]:
        return _summary(store.search(*kw.pop("prefix", (ns,)), **kw))

    for call in (
        {},
        {"filter": {"topic": "music"}},
        {"filter": {"topic": "music", "n": 3}},
        {"filter": {"topic": "sport"}},
        {"prefix": ((user,),)},
        {"prefix": ((user, "agents"),)},
    ):
        assert searched(ours, **dict(call)) == searched(theirs, **dict(call)), call
    for store in (ours, theirs):
        assert len(store.search(ns, limit=2)) == 2
        music = store.search(ns, filter={"topic": "music"}, limit=1)
        assert len(music) == 1 and music[0].value["topic"] == "music"
        assert len(store.search(ns, limit=2, offset=2)) == 1

    for store in (ours, theirs):
        assert store.list_namespaces(prefix=(user,)) == [
            (user, "agents", "planner"),
            (user, "memories"),
        ]
        assert store.list_namespaces(prefix=(user,), max_depth=2) == [
            (user, "agents"),
            (user, "memories"),
        ]
        assert store.list_namespaces(prefix=(user, "agents")) == [(user, "agents", "planner")]
        assert store.list_namespaces(prefix=(user,), suffix=("memories",)) == [(user, "memories")]

    for store in (ours, theirs):
        store.put(ns, "k1", {"content": "Ada plays the viola.", "topic": "music", "n": 1})
        updated = store.get(ns, "k1")
        assert updated is not None and updated.value["content"] == "Ada plays the viola."
        store.delete(ns, "k1")
        assert store.get(ns, "k1") is None
        assert {i.key for i in store.search(ns)} == {"k2", "k3"}


def test_put_is_a_reconciled_memory_and_search_is_memwells_retrieval(
    client: memwell.MemoryClient, ids: dict[str, str]
) -> None:
    user = ids["user"]
    store = MemwellStore(client)
    _fill(store, user)
    ns = (user, "memories")
    # The store's memories are the user's memories, with their history.
    listed = client.list_memories(user_id=user)
    assert listed.total == 4
    k1 = next(m for m in listed.memories if m.content == "Ada plays the cello.")
    store.put(ns, "k1", {"content": "Ada plays the viola.", "topic": "music"})
    assert [e.event for e in client.memory_history(k1.id)][-1] == "update"

    hits = store.search(ns, query="which instrument does Ada play?", limit=2)
    assert hits and hits[0].key == "k1" and hits[0].score is not None
    assert all(h.namespace == ns for h in hits)
    food = store.search(ns, query="what can Ada not eat?", filter={"topic": "food"})
    assert [h.key for h in food] == ["k2"]

    # The same fact under a new key is that key's own memory: keys never fold together.
    store.put(ns, "again", {"content": "Ada is allergic to peanuts.", "topic": "food", "n": 2})
    assert client.list_memories(user_id=user).total == 5
    first, again = store.get(ns, "k2"), store.get(ns, "again")
    assert first is not None and again is not None and first.value == again.value
    store.delete(ns, "again")
    assert store.get(ns, "again") is None and store.get(ns, "k2") is not None
    assert client.list_memories(user_id=user).total == 4

    with pytest.raises(NotImplementedError):
        store.search(ns, filter={"n": {"$gt": 1}})


def test_async_batch_and_a_compiled_graph_use_the_store(
    client: memwell.MemoryClient, ids: dict[str, str]
) -> None:
    user = ids["user"]
    store = MemwellStore(client)

    class State(TypedDict):
        user_id: str
        said: str
        recalled: list[str]

    def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
        store.put((state["user_id"], "memories"), "said", {"content": state["said"]})
        return {}

    def recall(state: State, *, store: BaseStore) -> dict[str, Any]:
        found = store.search((state["user_id"], "memories"), query="where does Ada live?")
        return {"recalled": [i.value["content"] for i in found]}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    graph = builder.compile(store=store)
    out = graph.invoke({"user_id": user, "said": "Ada lives in Lisbon.", "recalled": []})
    assert out["recalled"] == ["Ada lives in Lisbon."]

    async def scenario() -> list[str]:
        await store.aput((user, "memories"), "a1", {"content": "Ada drinks green tea."})
        got = await store.aget((user, "memories"), "a1")
        assert got is not None
        return [i.key for i in await store.asearch((user, "memories"), query="tea")]

    assert asyncio.run(scenario())[0] == "a1"


def test_langmem_tools_manage_and_search_memories_on_the_store(
    client: memwell.MemoryClient, ids: dict[str, str]
) -> None:
    user = ids["user"]
    store = MemwellStore(client)
    ns = (user, "memories")
    manage = create_manage_memory_tool(namespace=ns, store=store)
    search = create_search_memory_tool(namespace=ns, store=store)

    created = manage.invoke({"content": "Ada's favourite composer is Bach."})
    memory_id = created.rsplit(" ", 1)[-1]
    assert created.startswith("created memory")
    found = search.invoke({"query": "favourite composer"})
    assert "Bach" in found and memory_id in found

    manage.invoke({"content": "Ada's favourite composer is Handel.", "action": "update",
                   "id": memory_id})  # fmt: skip
    item = store.get(ns, memory_id)
    assert item is not None and item.value["content"] == "Ada's favourite composer is Handel."
    manage.invoke({"action": "delete", "id": memory_id})
    assert store.get(ns, memory_id) is None
    assert client.list_memories(user_id=user).total == 0


def test_a_tenant_never_sees_another_tenants_items(
    client_of: ClientOf, ids: dict[str, str]
) -> None:
    user = ids["user"]
    mine = MemwellStore(client_of(ids["tenant"]))
    theirs = MemwellStore(client_of(ids["tenant"] + "-b"))
    _fill(mine, user)
    ns = (user, "memories")
    assert theirs.get(ns, "k1") is None
    assert theirs.search(ns) == [] and theirs.search(ns, query="cello") == []
    assert theirs.list_namespaces(prefix=(user,)) == []
    theirs.delete(ns, "k1")
    assert mine.get(ns, "k1") is not None


def test_an_agent_label_scopes_memories_to_memwells_agent(
    client: memwell.MemoryClient, ids: dict[str, str]
) -> None:
    user = ids["user"]
    store = MemwellStore(client, agent_label=1)
    store.put((user, "planner", "notes"), "n1", {"content": "Ada's trip to Oslo is in May."})
    store.put((user,), "top", {"content": "Ada likes snow."})
    planner = client.list_memories(user_id=user, agent_id="planner")
    assert [m.content for m in planner.memories] == ["Ada's trip to Oslo is in May."]
    assert client.list_memories(user_id=user).total == 2
    got = store.get((user, "planner", "notes"), "n1")
    assert got is not None and got.namespace == (user, "planner", "notes")
