"""A LangGraph `BaseStore` over Memwell's long-term memory (extra `memwell[langgraph]`).

    from memwell import MemoryClient
    from memwell.integrations.langgraph import MemwellStore

    store = MemwellStore(MemoryClient("http://localhost:8420", api_key="mw_..."))
    graph = builder.compile(store=store)

Mapping:
- A namespace's label at `user_label` (default 0: `(user_id, "memories")`) is the
  Memwell user, and with `agent_label` set (1 for `(user_id, agent_id, ...)`) that
  label is the memory's agent_id; the whole namespace and the key are kept in the
  memory's metadata (under "langgraph"), so deeper labels scope items inside the user.
- Each key is one memory, a keyed item (metadata "store_key", see
  memwell/pipeline/store_keys.py) that changes only through its key, as in LangGraph's
  own stores: reconcile never merges it or supersedes it, nor folds it into another
  memory, so namespaces of one user (and keys of one namespace) never hide, take over or
  end each other's items, whatever their texts.
- `put` with a dict stores a memory through the direct-add path (POST /v1/memories).
  The memory's content is the value's "content" (text, or JSON), else the whole value
  as JSON. Putting an existing key edits its memory (PATCH, a versioned update).
  `put(..., None)` and `delete` delete the key's memory. A memory written before keys
  were kept apart may still answer to several keys: a put or delete of one of them
  leaves it to the others.
- `search(query=...)` is Memwell's hybrid, recency-weighted retrieval; without a query,
  the namespace's items newest first. `filter` is an equality filter on the value's
  fields, sent as a metadata containment filter; `limit` and `offset` page.
- `list_namespaces` reads the namespaces of the items put; with no user in the prefix
  it walks the tenant's users.

The async methods run the sync calls in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from memwell.sdk import Memory, MemoryClient, NotFoundError

#: the metadata key under which a memory records the store's items
META = "langgraph"
#: the metadata field that makes a memory a keyed item, which the service never merges
#: or supersedes (the API's contract; the service's side: memwell/pipeline/store_keys.py)
STORE_KEY = "store_key"
PAGE = 500
#: the most hits one search asks for (the search's own cap)
MAX_HITS = 100


def _enc(labels: Sequence[str]) -> str:
    """A namespace (or namespace + key) as one string a containment filter can match."""
    return json.dumps(list(labels), separators=(",", ":"), ensure_ascii=False)


def _prefixes(namespace: tuple[str, ...]) -> list[str]:
    return [_enc(namespace[:n]) for n in range(1, len(namespace) + 1)]


def _content(value: dict[str, Any]) -> str:
    content = value.get("content", value)
    return content if isinstance(content, str) else json.dumps(content, sort_keys=True)


def _check_filter(value: Any, where: str = "filter") -> None:
    """Only equality on values is a containment filter; operators are refused."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if str(key).startswith("$"):
                raise NotImplementedError(f"{where}: operator {key!r} is not supported")
            _check_filter(inner, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        raise NotImplementedError(f"{where}: list values are not supported")


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    pairs = zip(namespace, path, strict=False)
    if condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    return all(p == "*" or n == p for n, p in pairs)


class MemwellStore(BaseStore):
    """A LangGraph store whose items are Memwell memories of the client's tenant."""

    def __init__(
        self, client: MemoryClient, *, user_label: int = 0, agent_label: int | None = None
    ) -> None:
        self.client = client
        self.user_label = user_label
        #: the namespace label that is the memory's agent_id, e.g. 1 for (user, agent, ...)
        self.agent_label = agent_label

    # --- the batch LangGraph calls ----------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op.namespace, op.key))
            elif isinstance(op, PutOp):
                self._put(op.namespace, op.key, None if op.value is None else dict(op.value))
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise NotImplementedError(f"unknown operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    # --- mapping ------------------------------------------------------------------------
    def _user(self, namespace: tuple[str, ...]) -> str:
        if len(namespace) <= self.user_label:
            raise ValueError(
                f"namespace {namespace!r} has no user label at position {self.user_label}"
            )
        return namespace[self.user_label]

    def _agent(self, namespace: tuple[str, ...]) -> str | None:
        if self.agent_label is None or len(namespace) <= self.agent_label:
            return None
        return namespace[self.agent_label]

    def _find(self, namespace: tuple[str, ...], key: str) -> Memory | None:
        alias = {META: {"aliases": [_enc((*namespace, key))]}}
        page = self.client.list_memories(user_id=self._user(namespace), metadata=alias, limit=1)
        return page.memories[0] if page.memories else None

    @staticmethod
    def _value(memory: Memory) -> dict[str, Any]:
        value = dict(memory.metadata.get(META, {}).get("value") or {})
        # A merge may have rewritten the memory: its content is the truth.
        if isinstance(value.get("content"), str):
            value["content"] = memory.content
        return value or {"content": memory.content}

    def _item(self, memory: Memory, namespace: tuple[str, ...], key: str) -> Item:
        created = memory.created_at or datetime.now(UTC)
        return Item(
            value=self._value(memory), key=key, namespace=namespace, created_at=created,
            updated_at=memory.updated_at or created,
        )  # fmt: skip

    @staticmethod
    def _aliases(memory: Memory) -> list[tuple[str, ...]]:
        return [tuple(json.loads(a)) for a in memory.metadata.get(META, {}).get("aliases", [])]

    def _relabel(self, memory: Memory, aliases: list[tuple[str, ...]], value: Any) -> None:
        self.client.update_memory(memory.id, metadata=self._metadata(memory, aliases, value))

    @classmethod
    def _metadata(
        cls, memory: Memory | None, aliases: list[tuple[str, ...]], value: Any
    ) -> dict[str, Any]:
        """The memory's metadata for these keys: a keyed item when one key names it."""
        metadata = {k: v for k, v in (memory.metadata if memory else {}).items() if k != STORE_KEY}
        if len(aliases) == 1:
            metadata[STORE_KEY] = _enc(aliases[0])
        return {**metadata, META: cls._record(aliases, value)}

    # --- operations ---------------------------------------------------------------------
    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        memory = self._find(namespace, key)
        return None if memory is None else self._item(memory, namespace, key)

    def _put(self, namespace: tuple[str, ...], key: str, value: dict[str, Any] | None) -> None:
        alias = (*namespace, key)
        existing = self._find(namespace, key)
        if existing is not None:
            others = [a for a in self._aliases(existing) if a != alias]
            if not others and value is not None:
                metadata = self._metadata(existing, [alias], value)
                self.client.update_memory(existing.id, content=_content(value), metadata=metadata)
                return
            if others:  # a memory shared by keys (written before keys were kept apart)
                self._relabel(existing, others, existing.metadata.get(META, {}).get("value"))
            else:
                self._delete(existing)
        if value is None:
            return
        agent = self._agent(namespace)
        self.client.add_memory(
            user_id=self._user(namespace), content=_content(value),
            metadata=self._metadata(None, [alias], value),
            **({"agent_id": agent} if agent is not None else {}),
        )  # fmt: skip

    @staticmethod
    def _record(aliases: list[tuple[str, ...]], value: Any) -> dict[str, Any]:
        prefixes = sorted({p for alias in aliases for p in _prefixes(alias[:-1])})
        return {"aliases": [_enc(a) for a in aliases], "prefixes": prefixes, "value": value}

    def _delete(self, memory: Memory) -> None:
        # Deleted meanwhile is the outcome asked for.
        with contextlib.suppress(NotFoundError):
            self.client.delete_memory(memory.id)

    def _in_prefix(self, memory: Memory, prefix: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        for alias in self._aliases(memory):
            if alias[: len(prefix)] == prefix and len(alias) > len(prefix):
                yield alias

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        user = self._user(prefix)
        if op.filter:
            _check_filter(op.filter)
        wanted: dict[str, Any] = {"prefixes": [_enc(prefix)]}
        if op.filter:
            wanted["value"] = op.filter
        metadata = {META: wanted}
        want = max(op.offset, 0) + max(op.limit, 0)
        found: list[SearchItem] = []
        if want <= 0:
            return []
        if op.query:
            filters = {"metadata": metadata}
            hits = self.client.search(
                user_id=user, query=op.query, k=min(want, MAX_HITS), filters=filters
            ).hits
            for hit in hits:
                memory = Memory.model_validate(hit.model_dump())
                for alias in self._in_prefix(memory, prefix):
                    item = self._item(memory, alias[:-1], alias[-1])
                    found.append(_scored(item, hit.score))
        else:
            for memory in self._listing(user, metadata, want):
                for alias in self._in_prefix(memory, prefix):
                    found.append(_scored(self._item(memory, alias[:-1], alias[-1]), None))
        return found[max(op.offset, 0) : want]

    def _listing(self, user: str, metadata: dict[str, Any], want: int) -> Iterator[Memory]:
        cursor: str | None = None
        seen = 0
        while True:
            page = self.client.list_memories(
                user_id=user, metadata=metadata, limit=PAGE, cursor=cursor
            )
            for memory in page.memories:
                yield memory
                seen += 1
                if seen >= want:
                    return
            cursor = page.next_cursor
            if cursor is None:
                return

    def _users(self, op: ListNamespacesOp) -> list[str]:
        for condition in op.match_conditions or ():
            path = tuple(condition.path)
            user = path[self.user_label] if len(path) > self.user_label else "*"
            if condition.match_type == "prefix" and user != "*":
                return [user]
        users: list[str] = []
        cursor: str | None = None
        while True:
            page = self.client.list_users(limit=PAGE, cursor=cursor)
            users.extend(u.user_id for u in page.users)
            cursor = page.next_cursor
            if cursor is None:
                return users

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces: set[tuple[str, ...]] = set()
        for user in self._users(op):
            for memory in self._listing(user, {META: {}}, 10**9):
                for alias in self._aliases(memory):
                    namespace = alias[:-1]
                    if all(_matches(c, namespace) for c in op.match_conditions or ()):
                        depth = op.max_depth
                        namespaces.add(namespace[:depth] if depth is not None else namespace)
        ordered = sorted(namespaces)
        return ordered[op.offset : op.offset + op.limit]


def _scored(item: Item, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=item.namespace, key=item.key, value=item.value, created_at=item.created_at,
        updated_at=item.updated_at, score=score,
    )  # fmt: skip


__all__ = ["MemwellStore"]
