"""Text the SDK cannot send, refused before it leaves: a lone surrogate ("\\ud800").

A Python str may hold one, but UTF-8 cannot, so httpx failed with a raw
UnicodeEncodeError. Every call passes here once (`Call` checks its body, query and
path), and the refusal is the API's own: an InvalidInputError with the problem body
and the rule (`string_unicode`) the API answers when the same text arrives escaped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from memwell.sdk.errors import InvalidInputError

#: The API's rule for such text, as its 422 names it (pydantic's string check).
UNICODE_RULE: Final = "string_unicode"
UNICODE_MESSAGE: Final = (
    "Input should be a valid string, unable to parse raw data as a unicode string"
)
_PROBLEM: Final = "https://memwell.dev/problems/invalid-input"
_TITLE: Final = "Request validation failed"

Location = tuple[str | int, ...]


def _is_utf8(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _first_lone_surrogate(value: Any, loc: Location) -> Location | None:
    """Where in `value` a string holds a lone surrogate, or None."""
    if isinstance(value, str):
        return None if _is_utf8(value) else loc
    if isinstance(value, Mapping):
        for key, item in value.items():
            found = _first_lone_surrogate(key, (*loc, str(key))) or _first_lone_surrogate(
                item, (*loc, str(key))
            )
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if (found := _first_lone_surrogate(item, (*loc, index))) is not None:
                return found
    return None


def refuse_unsendable(value: Any, loc: Location) -> None:
    """Raise the API's InvalidInputError when `value` holds text UTF-8 cannot carry."""
    found = _first_lone_surrogate(value, loc)
    if found is None:
        return
    error = {"loc": list(found), "msg": UNICODE_MESSAGE, "type": UNICODE_RULE}
    body = {"type": _PROBLEM, "title": _TITLE, "status": 422, "errors": [error]}
    raise InvalidInputError(
        422, title=_TITLE, detail=f"{'.'.join(map(str, found))}: {UNICODE_MESSAGE}",
        type_uri=_PROBLEM, body=body,
    )  # fmt: skip
