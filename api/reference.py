"""The published API reference, generated from the app itself.

    python -m api.reference --write     # docs/openapi.json and docs/api.md

docs/openapi.json is the OpenAPI document the app serves at /openapi.json;
docs/api.md lists every operation from it for the documentation site. A test
regenerates both and fails when a committed copy is stale.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from api.main import create_app
from memwell.core.settings import Settings

METHODS = ("get", "post", "put", "patch", "delete")
PUBLISHED = ("openapi.json", "api.md")


def document() -> dict[str, Any]:
    """The OpenAPI document of an app built with the default settings."""
    schema: dict[str, Any] = create_app(Settings()).openapi()
    return schema


def render_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").strip()


def render_markdown(doc: dict[str, Any]) -> str:
    """One table per tag: method, path, summary and the first line of the description."""
    by_tag: dict[str, list[str]] = {}
    for path, item in doc["paths"].items():
        for method in METHODS:
            if (op := item.get(method)) is None:
                continue
            about = (op.get("description") or "").strip().split("\n\n")[0]
            summary = _cell(op.get("summary", ""))
            row = f"| `{method.upper()}` | `{path}` | {summary} | {_cell(about)} |"
            by_tag.setdefault((op.get("tags") or ["other"])[0], []).append(row)
    out = [
        "# API reference",
        "",
        f"{doc['info']['title']} {doc['info']['version']}, generated from the app "
        "(`python -m api.reference --write`; a test fails when it is stale). The full "
        "OpenAPI document, with every request and response schema, is "
        "[openapi.json](openapi.json); a running API serves it at `/openapi.json` and "
        "an interactive view at `/docs`. Errors are `application/problem+json`, see "
        "[SDK and REST](sdk.md).",
        "",
    ]
    for tag in sorted(by_tag):
        out += [f"## {tag}", "", "| method | path | summary | what it does |", "|---|---|---|---|"]
        out += [*by_tag[tag], ""]
    return "\n".join(out)


def write(docs_dir: Path) -> list[Path]:
    doc = document()
    texts = (render_json(doc), render_markdown(doc))
    paths = [docs_dir / name for name in PUBLISHED]
    for path, text in zip(paths, texts, strict=True):
        path.write_text(text, encoding="utf-8")
    return paths


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        for written in write(Path(__file__).resolve().parents[1] / "docs"):
            print(f"wrote {written}", file=sys.stderr)
    else:
        print(render_json(document()), end="")
