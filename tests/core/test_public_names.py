"""What the README promises importable from `memwell` is importable from `memwell`."""

from __future__ import annotations

import re
from pathlib import Path

import memwell


def test_every_error_class_the_readme_names_imports_from_memwell(repo_root: Path) -> None:
    readme = (repo_root / "README.md").read_text()
    named = set(re.findall(r"`(?:memwell\.)?([A-Z][A-Za-z]*Error)`", readme))
    assert {"APIError", "ForbiddenError", "PayloadTooLargeError", "ServerError"} <= named
    missing = sorted(name for name in named if not hasattr(memwell, name))
    assert missing == []
    for name in named:
        assert issubclass(getattr(memwell, name), Exception)


def test_all_lists_only_names_that_exist() -> None:
    assert [name for name in memwell.__all__ if not hasattr(memwell, name)] == []
