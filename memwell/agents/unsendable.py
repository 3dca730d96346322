"""MCP messages that hold a lone surrogate, answered with the rule REST names.

JSON may carry "\\ud800" as an escape, but the MCP SDK reads each message with
pydantic's JSON parser, which stops there ("unexpected end of hex escape") before a
tool sees the text. So every transport looks at the raw message first: one that holds
a lone surrogate is answered here, as a JSON-RPC invalid-params error whose message
and data name REST's rule for such text (`string_unicode`), and never reaches the SDK.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import pydantic_core

from memwell.core.text_rules import is_utf8_text

#: REST's rule for text UTF-8 cannot carry (pydantic's string check), as its 422 names it.
UNICODE_RULE: Final = "string_unicode"
UNICODE_MESSAGE: Final = (
    "Input should be a valid string, unable to parse raw data as a unicode string"
)
INVALID_PARAMS: Final = -32602
#: A \uD800-\uDFFF escape: only a message holding one is looked at twice.
_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")


def _where(message: dict[str, Any]) -> list[str]:
    """The tool argument (or else the part of the message) that holds the text."""
    params = message.get("params")
    arguments = params.get("arguments") if isinstance(params, dict) else None
    if isinstance(arguments, dict):
        for name, value in arguments.items():
            if isinstance(value, str) and not is_utf8_text(value):
                return ["arguments", str(name)]
    return ["params"]


def refusal(raw: str | bytes) -> bytes | None:
    """The JSON-RPC error that answers `raw` when it holds a lone surrogate (b"" for a
    notification, which gets no answer); None for any message the SDK can read."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if _SURROGATE_ESCAPE.search(data) is None:
        return None
    try:
        pydantic_core.from_json(data)
        return None  # a surrogate pair: valid text
    except ValueError:
        pass
    try:
        message = json.loads(data)  # Python's parser keeps lone surrogates
    except ValueError:
        return None  # not JSON: the SDK's own parse error
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    if "id" not in message:
        return b""
    loc = _where(message)
    error = {
        "code": INVALID_PARAMS,
        "message": f"invalid-input: {'.'.join(loc)}: {UNICODE_MESSAGE}",
        "data": {"type": UNICODE_RULE, "loc": loc},
    }
    # ASCII JSON: the id itself may hold a surrogate.
    return json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}).encode()
