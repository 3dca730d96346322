"""Opaque keyset cursors for paged lists.

A cursor carries the last row's sort key and names the list it belongs to (tenant,
owner, sort), so a cursor copied into another user's or tenant's request is refused
instead of paging through the wrong rows. Keyset paging (never OFFSET) stays stable
while rows are inserted between pages, and costs the same on page 1,000 as on page 1.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from memwell.core.errors import InvalidCursor


def encode_cursor(scope: Mapping[str, str], key: list[Any]) -> str:
    """A cursor for the page after the row whose sort key is `key`."""
    raw = json.dumps({"s": dict(scope), "k": key}, separators=(",", ":"), default=str)
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, scope: Mapping[str, str]) -> list[Any]:
    """The sort key a cursor carries; InvalidCursor unless it was issued for `scope`."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
    # RecursionError: a forged cursor of deeply nested arrays ("[[[[...").
    except (ValueError, binascii.Error, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidCursor("malformed cursor") from exc
    if not isinstance(data, dict) or not isinstance(data.get("k"), list):
        raise InvalidCursor("malformed cursor")
    if data.get("s") != dict(scope):
        raise InvalidCursor("this cursor belongs to another list (user, tenant or sort)")
    key: list[Any] = data["k"]
    return key
