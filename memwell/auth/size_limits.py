"""Configured size limits, checked after schema validation.

The schema carries hard caps (memwell.intake.turns) that every client can read in the
OpenAPI document; an operator may set lower limits in the settings, and a request
over one of those gets a 413 naming the limit. Body bytes are capped earlier, by the
API's body-limit middleware, before the body is read whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memwell.core.errors import TooLarge
from memwell.core.settings import Settings
from memwell.intake.turns import TurnIn, metadata_size


def check_message(message: str, settings: Settings) -> None:
    if len(message) > settings.max_message_chars:
        raise TooLarge(
            f"message is {len(message)} characters; the limit is {settings.max_message_chars}"
        )


def check_turns(turns: Sequence[TurnIn], settings: Settings) -> None:
    """Refuse a whole batch when any part is over a limit (batches are atomic)."""
    if len(turns) > settings.max_batch_turns:
        raise TooLarge(f"batch has {len(turns)} turns; the limit is {settings.max_batch_turns}")
    for index, turn in enumerate(turns):
        if len(turn.content) > settings.max_message_chars:
            raise TooLarge(
                f"turns[{index}].content is {len(turn.content)} characters; "
                f"the limit is {settings.max_message_chars}"
            )
        size = metadata_size(turn.metadata)
        if size > settings.max_metadata_bytes:
            raise TooLarge(
                f"turns[{index}].metadata is {size} bytes; "
                f"the limit is {settings.max_metadata_bytes}"
            )


def check_memories(contents: Sequence[tuple[str, dict[str, Any]]], settings: Settings) -> None:
    """Memories added or edited directly obey the same limits as turns: (content,
    metadata) pairs, refused whole when any is over."""
    for index, (content, metadata) in enumerate(contents):
        if len(content) > settings.max_message_chars:
            raise TooLarge(
                f"memories[{index}].content is {len(content)} characters; "
                f"the limit is {settings.max_message_chars}"
            )
        size = metadata_size(metadata)
        if size > settings.max_metadata_bytes:
            raise TooLarge(
                f"memories[{index}].metadata is {size} bytes; "
                f"the limit is {settings.max_metadata_bytes}"
            )
