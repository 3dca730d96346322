"""How a process says its settings cannot work: one line that names each setting and
the rule it breaks, and never a value.

Every entry point loads the settings through here (the `memwell` command and its
subcommands, `memwell up`, the Celery worker and beat, the API's app factory), so an
operator sees the same line wherever a setting is wrong, instead of a traceback whose
message ended with the tail of the settings, secrets included.
"""

from __future__ import annotations

import re
import sys
from typing import Final

from pydantic import ValidationError
from pydantic_settings import SettingsError

from memwell.core.errors import ConfigurationError
from memwell.core.settings import Settings, get_settings

#: What a settings failure may be raised as.
SETTINGS_ERRORS: Final = (ValidationError, SettingsError, ConfigurationError)
_FIELD_IN_TEXT: Final = re.compile(r'field "(\w+)"')


def _setting_name(field: str) -> str:
    """The environment variable a field is read from (its own name when it has none)."""
    info = Settings.model_fields.get(field)
    alias = info.validation_alias if info is not None else None
    return alias if isinstance(alias, str) else field


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _problems(exc: ValidationError) -> list[str]:
    problems = []
    for error in exc.errors(include_input=False, include_url=False, include_context=False):
        loc = [str(part) for part in error["loc"]]
        name = ".".join([_setting_name(loc[0]), *loc[1:]]) if loc else "settings"
        rule = _first_line(str(error["msg"]).removeprefix("Value error, "))
        problems.append(f"{name}: {rule}")
    return problems


def describe_settings_error(exc: BaseException) -> str | None:
    """The one line for a settings failure; None for any other error."""
    if isinstance(exc, ValidationError) and exc.title == Settings.__name__:
        return "invalid settings: " + "; ".join(_problems(exc))
    if isinstance(exc, SettingsError):
        # A JSON setting that does not parse; pydantic-settings names the field only.
        found = _FIELD_IN_TEXT.search(str(exc))
        name = _setting_name(found.group(1)) if found else "a setting"
        return f"invalid settings: {name}: must be valid JSON"
    if isinstance(exc, ConfigurationError):
        return _first_line(str(exc)) or "the configuration cannot work"
    return None


def settings_or_exit() -> Settings:
    """The process's settings; when they cannot work, their one line on standard error
    and exit status 1 (for entry points outside the `memwell` command)."""
    try:
        return get_settings()
    except SETTINGS_ERRORS as exc:
        line = describe_settings_error(exc)
        if line is None:  # a ValidationError of another model: a bug, with its traceback
            raise
        sys.stderr.write(f"Error: {line}\n")
        sys.stderr.flush()
        raise SystemExit(1) from None
