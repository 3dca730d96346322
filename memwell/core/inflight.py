"""How many HTTP requests this process is serving right now.

The API's request middleware counts them; the chat path asks whether its request is
the only one, to decide where a local query embedding runs (memwell/chat/service.py). A
module-level count is enough: each API process has one event loop, and the count is
only ever changed on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

_serving = 0


@contextmanager
def serving() -> Iterator[None]:
    """Count one request for the duration of the block."""
    global _serving
    _serving += 1
    try:
        yield
    finally:
        _serving -= 1


def alone() -> bool:
    """True when at most one request is being served (outside the API: always)."""
    return _serving <= 1
