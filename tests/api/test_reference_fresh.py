"""The published API reference (docs/openapi.json, docs/api.md) is what the app serves."""

from __future__ import annotations

from pathlib import Path

from api.reference import document, render_json, render_markdown


def test_published_api_reference_is_fresh(repo_root: Path) -> None:
    doc = document()
    for name, text in (("openapi.json", render_json(doc)), ("api.md", render_markdown(doc))):
        assert (repo_root / "docs" / name).read_text() == text, (
            f"docs/{name} is stale: run `python -m api.reference --write`"
        )
    paths = doc["paths"]
    assert "/v1/chat" in paths and "/v1/turns" in paths
    assert all(f"`{path}`" in render_markdown(doc) for path in paths)
