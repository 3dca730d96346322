"""A path convertor for client-chosen ids.

User and turn ids are the client's strings: they may contain "/" (sent as %2F, which
arrives decoded), and control characters must reach validation to be refused with a
422, not fall through routing as a 404. Starlette's `path` stops at a newline, so
`{name:id}` matches any non-empty text. Importing this module registers it.
"""

from __future__ import annotations

from starlette.convertors import Convertor, register_url_convertor


class AnyTextConvertor(Convertor[str]):
    regex = r"[\s\S]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("id", AnyTextConvertor())
