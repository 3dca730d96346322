"""A model's answer is data: the one check every value in it passes before use.

What a model writes is as untrusted as what a user sends: a turn can steer it ("write
\\u0000 in your memory"), and a broken or hostile endpoint can answer anything. So the
pipeline's answer schemas (memwell/pipeline/llm_analysis.py and llm_steps.py,
memwell/entities/llm_schema.py) build their fields from the types here, and
StructuredLLM (memwell/llm/structured.py) validates every answer with an `OutputCheck`
as the validation's context:

- the answer as a whole: at most MAX_ANSWER_CHARS, and JSON nested at most MAX_DEPTH
  deep, refused before the JSON reader sees it (which would recurse into a
  RecursionError);
- text: the doors' rule (memwell/core/text_rules.py) and a length. Text that breaks it
  is not mended, since stripping characters would put words in the model's mouth: the
  item holding it is dropped (a `droppable` list), or the answer refused where the text
  is the whole answer (a summary, a merged memory);
- scores: finite numbers, clamped into their range; NaN, infinities, booleans and
  anything else are read as missing (local mode's rule scores the item);
- kinds: one of the allowed, else the default;
- numbers that name something (the message a memory comes from, the memory a decision
  targets): a whole number within bounds, else missing;
- dates: ISO dates from FIRST_DATE to LAST_DATE, else missing.

Every value mended and every item dropped is noted on the `OutputCheck`; StructuredLLM
counts them as fallbacks with reason `invalid_value`. An answer refused whole falls
back with `invalid_output` (`invalid_value` when all it broke was a value rule).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Final, TypeVar

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic_core import PydanticCustomError

from memwell.core.redaction import describe
from memwell.core.text_rules import text_problem

V = TypeVar("V")

#: Fallback reasons: the answer as a whole was unusable; one of its values was.
INVALID_OUTPUT: Final = "invalid_output"
INVALID_VALUE: Final = "invalid_value"
#: Far above what the pipeline's max_tokens let an honest model write.
MAX_ANSWER_CHARS: Final = 256_000
#: The pipeline's schemas nest four deep; a model has no reason to go further.
MAX_DEPTH: Final = 32
FIRST_DATE: Final = date(1900, 1, 1)
LAST_DATE: Final = date(2200, 12, 31)
#: pydantic's error type for a value these rules refuse.
VALUE_RULE: Final = "model_value"
#: Error types that say a value broke a rule, not that the answer has the wrong shape.
_VALUE_ERRORS: Final = frozenset({VALUE_RULE, "string_too_short", "string_too_long",
                                  "string_unicode"})  # fmt: skip


class InvalidAnswer(ValueError):
    """An answer refused before validation; its message never quotes the answer."""


@dataclass
class OutputCheck:
    """What validating one answer mended and dropped (the validation's context)."""

    mended: int = 0
    #: the items dropped, as the model wrote them
    dropped: list[Any] = field(default_factory=list)

    @property
    def problems(self) -> int:
        return self.mended + len(self.dropped)


def _check(info: ValidationInfo) -> OutputCheck | None:
    return info.context if isinstance(info.context, OutputCheck) else None


def _mended(info: ValidationInfo, value: V) -> V:
    if (check := _check(info)) is not None:
        check.mended += 1
    return value


def brackets(text: str) -> Iterator[str]:
    """The brackets of a JSON text outside its strings, in order."""
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[}]":
            yield ch


def check_shape(text: str) -> None:
    """Refuse an answer too long or nested too deep to read safely (strings respected)."""
    if len(text) > MAX_ANSWER_CHARS:
        raise InvalidAnswer(f"the answer is over {MAX_ANSWER_CHARS} characters")
    depth = 0
    for ch in brackets(text):
        if ch in "{[":
            depth += 1
            if depth > MAX_DEPTH:
                raise InvalidAnswer(f"the answer nests deeper than {MAX_DEPTH} levels")
        else:
            depth = max(0, depth - 1)


def _text_rule(value: str) -> str:
    if (problem := text_problem(value)) is not None:
        raise PydanticCustomError(VALUE_RULE, problem)
    return value


#: The doors' rule, on a `str` field (with its length as a Field).
TEXT_RULE: Final = AfterValidator(_text_rule)


def _number(value: object) -> float | None:
    """A finite number from a JSON number or numeric text; None for anything else."""
    if isinstance(value, str) and len(value) <= 32:
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def clamped(lo: int, hi: int) -> BeforeValidator:
    """A score: rounded into lo..hi; missing (None) when it is no finite number."""

    def clamp(value: object, info: ValidationInfo) -> int | None:
        if value is None:
            return None
        number = _number(value)
        if number is None:
            return _mended(info, None)
        if not lo <= number <= hi:
            return _mended(info, min(hi, max(lo, round(number))))
        return round(number)

    return BeforeValidator(clamp)


def whole_number(lo: int, hi: int, *, missing: int | None) -> BeforeValidator:
    """A number naming something: a whole number in lo..hi, else `missing`."""

    def bounded(value: object, info: ValidationInfo) -> int | None:
        if value is None:
            return missing
        number = _number(value)
        if number is None or number != int(number) or not lo <= number <= hi:
            return _mended(info, missing)
        return int(number)

    return BeforeValidator(bounded)


def one_of(allowed: tuple[str, ...], default: str, *, optional: bool = False) -> BeforeValidator:
    """A kind: one of `allowed`, else `default`; None (left out) stays None when
    `optional`."""

    def known(value: object, info: ValidationInfo) -> object:
        if (value is None and optional) or (isinstance(value, str) and value in allowed):
            return value
        return _mended(info, default)

    return BeforeValidator(known)


def _sane_date(value: object, info: ValidationInfo) -> date | None:
    if value is None:
        return None
    parsed: date | None = None
    if isinstance(value, str) and len(value) <= 32:
        try:
            parsed = date.fromisoformat(value.strip())
        except ValueError:
            parsed = None
    if parsed is None or not FIRST_DATE <= parsed <= LAST_DATE:
        return _mended(info, None)
    return parsed


#: An ISO date within FIRST_DATE..LAST_DATE, else missing.
SANE_DATE: Final = BeforeValidator(_sane_date)


def value_errors_only(exc: ValidationError) -> bool:
    """Whether every error of `exc` is a value breaking a rule (not a wrong shape)."""
    return all(e["type"] in _VALUE_ERRORS for e in exc.errors(include_input=False))


def droppable(max_items: int) -> WrapValidator:
    """A list whose items that break a value rule are dropped (and noted), the rest
    kept; an item of the wrong shape still refuses the answer. Items past `max_items`
    are dropped too."""

    def keep_valid(
        items: object, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> list[Any]:
        if not isinstance(items, list):
            return list(handler(items))  # the list's own error
        check = _check(info)
        kept: list[Any] = []
        for item in items[:max_items]:
            # What was noted inside an item that is then dropped counts as its drop.
            mended, dropped = (check.mended, len(check.dropped)) if check else (0, 0)
            try:
                kept += handler([item])
            except ValidationError as exc:
                if not value_errors_only(exc):
                    raise
                if check is not None:
                    check.mended = mended
                    del check.dropped[dropped:]
                    check.dropped.append(item)
        if check is not None:
            check.dropped += items[max_items:]
        return kept

    return WrapValidator(keep_valid)


def answer_reason(exc: BaseException) -> str:
    """The fallback reason for an answer refused with `exc`."""
    if isinstance(exc, ValidationError) and value_errors_only(exc):
        return INVALID_VALUE
    return INVALID_OUTPUT


def answer_problem(exc: BaseException) -> str:
    """What was wrong with an answer, for a log line and for the model's second try:
    where and why, never the answer's text."""
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON: {exc.msg} at character {exc.pos}"
    if isinstance(exc, InvalidAnswer):
        return str(exc)
    if isinstance(exc, RecursionError):
        return "the answer nests too deep"
    return describe(exc)
