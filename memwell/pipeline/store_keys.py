"""Keyed memories: the items of a key-value store kept in Memwell (the LangGraph store).

A memory whose metadata holds a string under `store_key` is that key's value, and it
changes only through its key. Reconcile never merges it into another memory nor
supersedes another memory with it, and never merges into it or supersedes it for
another memory (memwell/pipeline/reconcile.py). Its exact-dedup identity is its key
with its normalised content, so the same text under two keys is two memories, and an
exact duplicate reinforces only its own key's memory: a key can never hide, take over or
end another key's value, which is what a store's caller relies on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Final

from memwell.core.text import content_hash, normalize

#: the metadata field that makes a memory a store's keyed item
STORE_KEY: Final = "store_key"
#: SQL on a `memories` row: it is not a keyed item (the same test as `store_key`)
UNKEYED_ROW: Final = "jsonb_typeof(metadata -> 'store_key') IS DISTINCT FROM 'string'"


def store_key(metadata: Mapping[str, Any] | None) -> str | None:
    """The store key a memory with this metadata is the value of, if any."""
    key = (metadata or {}).get(STORE_KEY)
    return key if isinstance(key, str) else None


def memory_hash(content: str, metadata: Mapping[str, Any] | None) -> str:
    """A memory's exact-dedup key: its normalised content, and its store key if keyed."""
    key = store_key(metadata)
    if key is None:
        return content_hash(content)
    return hashlib.sha256(f"{key}\x00{normalize(content)}".encode()).hexdigest()
