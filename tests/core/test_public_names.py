"""What the README and the docs promise importable from `memwell` is importable from it."""

from __future__ import annotations

import re
from pathlib import Path

import memwell


def test_every_error_class_the_docs_name_imports_from_memwell(repo_root: Path) -> None:
    pages = [repo_root / "README.md", repo_root / "docs" / "sdk.md"]
    readme = "\n".join(page.read_text() for page in pages)
    named = set(re.findall(r"`(?:memwell\.)?([A-Z][A-Za-z]*Error)`", readme))
    assert {"APIError", "ForbiddenError", "PayloadTooLargeError", "ServerError"} <= named
    missing = sorted(name for name in named if not hasattr(memwell, name))
    assert missing == []
    for name in named:
        assert issubclass(getattr(memwell, name), Exception)


def test_all_lists_only_names_that_exist() -> None:
    assert [name for name in memwell.__all__ if not hasattr(memwell, name)] == []
