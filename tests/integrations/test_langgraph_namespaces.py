"""Namespaces of one user in the LangGraph store are independent, as in LangGraph's own
InMemoryStore: an item changes only through its own key, whatever the other keys hold
(the same text, a paraphrase, or a changed fact about the same subject, which
reconcile would otherwise merge or supersede). Against the live API over real HTTP and
real Postgres; puts are direct adds, stored before the call returns, so no worker is
involved.

The property test runs random put/get/delete/search sequences on both stores and
compares what is comparable:
- `get`: the same item (namespace, key, value) or None, after every step;
- `search` without a query, with or without a value filter, and a limit above the
  number of items: the same set of (namespace, key, value). The order is not compared
  (ours is newest first, InMemoryStore's is insertion order);
- `search` with a query: ours ranks by retrieval and drops hits under the similarity
  floor, InMemoryStore (no index) returns every item unranked; so ours must be a subset
  of theirs, every hit an item that exists now with its current value;
- `list_namespaces` under the user: the namespaces that hold items in InMemoryStore
  (its own `list_namespaces` also lists every namespace a `get` or a `delete` looked in).
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

import memwell
from memwell.integrations.langgraph import MemwellStore

LIMIT = 50  # above the most items a sequence can hold (3 namespaces x 3 keys)
# Texts that reconcile would fold together if it could: one slot with three values
# (supersede), a paraphrase pair (merge), and a sentence every key may repeat (exact).
TEXTS = (
    "Ada lives in Lisbon.",
    "Ada lives in Porto.",
    "Ada moved to Berlin.",
    "Ada plays the cello every evening.",
    "Every evening Ada plays the cello.",
    "Ada is allergic to peanuts.",
)
KEYS = ("k1", "k2", "k3")

Entry = tuple[tuple[str, ...], str, Any]


def _entry(item: Any) -> Entry | None:
    return None if item is None else (item.namespace, item.key, item.value)


def _listed(store: BaseStore, prefix: tuple[str, ...], **kw: Any) -> set[tuple[Any, ...]]:
    return {(i.namespace, i.key, repr(sorted(i.value.items()))) for i in
            store.search(prefix, limit=LIMIT, **kw)}  # fmt: skip


def test_updating_one_namespaces_key_leaves_anothers_key_alone(
    client: memwell.MemoryClient, ids: dict[str, str]
) -> None:
    user = ids["user"]
    store = MemwellStore(client)
    a, b = (user, "agentA"), (user, "agentB")
    store.put(a, "k1", {"content": "Ada lives in Lisbon."})
    store.put(b, "k2", {"content": "Ada lives in Lisbon."})
    assert store.get(b, "k2") is not None

    store.put(a, "k1", {"content": "Ada lives in Porto."})

    got = store.get(b, "k2")
    assert got is not None and got.value == {"content": "Ada lives in Lisbon."}
    moved = store.get(a, "k1")
    assert moved is not None and moved.value == {"content": "Ada lives in Porto."}
    # Both values stay apart through further updates of either key.
    store.put(b, "k2", {"content": "Ada lives in Porto.", "by": "B"})
    store.put(a, "k1", {"content": "Ada lives in Lisbon.", "by": "A"})
    assert [_entry(store.get(a, "k1")), _entry(store.get(b, "k2"))] == [
        (a, "k1", {"content": "Ada lives in Lisbon.", "by": "A"}),
        (b, "k2", {"content": "Ada lives in Porto.", "by": "B"}),
    ]


def test_a_changed_fact_under_another_key_neither_hides_nor_ends_a_key(
    client: memwell.MemoryClient, ids: dict[str, str]
) -> None:
    user = ids["user"]
    store = MemwellStore(client)
    a, b = (user, "agentA"), (user, "agentB")
    store.put(a, "k1", {"content": "Ada lives in Lisbon."})

    store.put(b, "k3", {"content": "Ada lives in Porto."})
    got = store.get(a, "k1")
    assert got is not None and got.value == {"content": "Ada lives in Lisbon."}
    assert {i.key for i in store.search(a)} == {"k1"}

    store.delete(b, "k3")
    got = store.get(a, "k1")
    assert got is not None and got.value == {"content": "Ada lives in Lisbon."}
    assert store.get(b, "k3") is None


def test_a_paraphrase_under_another_key_keeps_its_own_value(
    client: memwell.MemoryClient, ids: dict[str, str]
) -> None:
    user = ids["user"]
    store = MemwellStore(client)
    a, b = (user, "agentA"), (user, "agentB")
    store.put(a, "k1", {"content": "Ada plays the cello every evening.", "n": 1})
    store.put(b, "k2", {"content": "Every evening Ada plays the cello.", "n": 2})
    first, second = store.get(a, "k1"), store.get(b, "k2")
    assert first is not None and first.value["n"] == 1
    assert second is not None and second.value == {
        "content": "Every evening Ada plays the cello.",
        "n": 2,
    }
    store.delete(a, "k1")
    assert store.get(b, "k2") is not None


def test_a_memory_keys_shared_before_is_split_by_a_put_to_one_of_them(
    client: memwell.MemoryClient, ids: dict[str, str]
) -> None:
    """An earlier version let keys share one memory (the same text put under both): a
    put to one key leaves the memory, as a keyed item, to the other."""
    user = ids["user"]
    store = MemwellStore(client)
    a, b = (user, "agentA"), (user, "agentB")
    lisbon = {"content": "Ada lives in Lisbon."}
    record = MemwellStore._record([(*a, "k1"), (*b, "k2")], lisbon)
    shared = client.add_memory(user_id=user, content=lisbon["content"],
                               metadata={"langgraph": record})  # fmt: skip
    assert _entry(store.get(a, "k1")) == (a, "k1", lisbon)

    store.put(a, "k1", {"content": "Ada lives in Porto."})

    assert _entry(store.get(b, "k2")) == (b, "k2", lisbon)
    assert _entry(store.get(a, "k1")) == (a, "k1", {"content": "Ada lives in Porto."})
    kept = client.get_memory(shared.memory_id)
    assert kept.metadata["store_key"] == f'["{user}","agentB","k2"]'
    # Now keyed, its text no longer absorbs the same text added from outside the store.
    assert client.add_memory(user_id=user, content=lisbon["content"]).action == "added"


_namespace = st.sampled_from(("agentA", "agentB", "agentA/notes"))
_value = st.fixed_dictionaries({"content": st.sampled_from(TEXTS), "tag": st.sampled_from("xy")})
_op = st.one_of(
    st.tuples(st.just("put"), _namespace, st.sampled_from(KEYS), _value),
    st.tuples(st.just("delete"), _namespace, st.sampled_from(KEYS)),
    st.tuples(st.just("search"), _namespace, st.sampled_from(("", "x")), st.booleans()),
)


def test_random_sequences_match_langgraphs_in_memory_store(
    client: memwell.MemoryClient, ids: dict[str, str]
) -> None:
    runs = itertools.count()

    # Derandomized and bounded, so CI runs the same few sequences every time.
    @settings(max_examples=12, derandomize=True, deadline=None, database=None)
    @given(st.lists(_op, min_size=1, max_size=10))
    def run(ops: list[tuple[Any, ...]]) -> None:
        user = f"{ids['user']}-{next(runs)}"  # a fresh user per sequence
        ours, theirs = MemwellStore(client), InMemoryStore()
        spaces = [(user, *label.split("/")) for label in ("agentA", "agentB", "agentA/notes")]

        def space(label: str) -> tuple[str, ...]:
            return (user, *label.split("/"))

        for op in ops:
            if op[0] == "put":
                for store in (ours, theirs):
                    store.put(space(op[1]), op[2], dict(op[3]))
            elif op[0] == "delete":
                for store in (ours, theirs):
                    store.delete(space(op[1]), op[2])
            else:
                _, label, tag, queried = op
                kw: dict[str, Any] = {"filter": {"tag": tag}} if tag else {}
                if queried:
                    hits = _listed(ours, space(label), query="where does Ada live?", **kw)
                    assert hits <= _listed(theirs, space(label), **kw), op
                else:
                    assert _listed(ours, space(label), **kw) == _listed(
                        theirs, space(label), **kw
                    ), op
            for namespace, key in itertools.product(spaces, KEYS):
                assert _entry(ours.get(namespace, key)) == _entry(theirs.get(namespace, key)), (
                    op,
                    namespace,
                    key,
                )
        for prefix in [(user,), *spaces]:
            assert _listed(ours, prefix) == _listed(theirs, prefix), prefix
        held = sorted({i.namespace for i in theirs.search((user,), limit=LIMIT)})
        assert ours.list_namespaces(prefix=(user,)) == held

    run()
