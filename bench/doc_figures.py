"""The performance figures the README and the documentation quote, kept in one file.

`docs/figures/headline.json` holds each quoted figure once, by name, with the run it
came from. A page quotes one as `<!--fig chat.p95_ms-->15.0<!--/fig-->`: the comments
do not render (GitHub or mkdocs), the value does. `python -m bench.report` writes the
figures of the run it made into the file and rewrites every quote; a page edited by hand
that states another value fails `tests/local/test_doc_figures.py`.

    python -m bench.doc_figures            # rewrite every quote from the file
    python -m bench.doc_figures --check    # list the quotes that differ; exit 1 if any
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
SOURCE = REPO_ROOT / "docs" / "figures" / "headline.json"
QUOTE = re.compile(r"<!--fig (?P<name>[\w.]+)-->(?P<value>.*?)<!--/fig-->")


@dataclass(frozen=True)
class Quote:
    page: Path
    line: int
    name: str
    value: str


def pages(root: Path = REPO_ROOT) -> list[Path]:
    """Every page that may quote a figure: the README and the documentation site."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def load(source: Path = SOURCE) -> dict[str, str]:
    """Figure name -> the value as pages state it."""
    figures = json.loads(source.read_text())["figures"]
    return {name: str(entry["value"]) for name, entry in figures.items()}


def quotes(page: Path) -> list[Quote]:
    text = page.read_text()
    return [
        Quote(page, text.count("\n", 0, m.start()) + 1, m["name"], m["value"])
        for m in QUOTE.finditer(text)
    ]


def mismatches(figures: Mapping[str, str], in_pages: Iterable[Path]) -> list[str]:
    """Every quote whose value is not the source's, or whose name the source lacks."""
    wrong = []
    for page in in_pages:
        for q in quotes(page):
            if q.name not in figures:
                wrong.append(f"{q.page.name}:{q.line}: {q.name} is not in {SOURCE.name}")
            elif q.value != figures[q.name]:
                wrong.append(
                    f"{q.page.name}:{q.line}: {q.name} says {q.value!r}, "
                    f"the source {figures[q.name]!r}"
                )
    return wrong


def rewrite(figures: Mapping[str, str], in_pages: Iterable[Path]) -> list[Path]:
    """Put the source's value in every quote; the pages that changed."""

    def value(m: re.Match[str]) -> str:
        return f"<!--fig {m['name']}-->{figures.get(m['name'], m['value'])}<!--/fig-->"

    changed = []
    for page in in_pages:
        text = page.read_text()
        new = QUOTE.sub(value, text)
        if new != text:
            page.write_text(new)
            changed.append(page)
    return changed


# --- from a report run: each figure key's headline -> the names it sets -------------


def _chat(h: Any) -> dict[str, str]:
    return {"chat.p95_ms": f"{h.p95_ms:.1f}", "chat.ratio_p95": f"{h.ratio_p95:.2f}x"}


def _concurrency(h: Any) -> dict[str, str]:
    if 50 not in h.clients:
        return {}
    at = h.clients.index(50)
    return {
        "chat_load.req_s": f"{h.chat_rps[at]:.0f}",
        "chat_load.p95_ms": f"{h.chat_p95_ms[at]:.0f}",
    }


def _enqueue(h: Any) -> dict[str, str]:
    return {
        "enqueue.single_us": f"{h.single_us:.0f}",
        "enqueue.batched_us": f"{h.batched_us:.0f}",
        "enqueue.send_task_us": f"{h.celery_us:.0f}",
    }


def _pipeline(prefix: str, *, embedder: bool) -> Callable[[Any], dict[str, str]]:
    def names(h: Any) -> dict[str, str]:
        found = {
            f"{prefix}.turns_s": f"{h.turns_per_s:.0f}",
            f"{prefix}.share": f"{h.turns_per_s / h.embedder_turns_per_s:.0%}",
        }
        if embedder:
            found[f"{prefix}.embedder_texts_s"] = f"{h.embedder_sentences_per_s:.0f}"
            found[f"{prefix}.embedder_turns_s"] = f"{h.embedder_turns_per_s:.0f}"
        return found

    return names


def _retrieval(h: Any) -> dict[str, str]:
    return {"search_1k.p95_ms": f"{h.search_p95_ms:.1f}"}


def _search_sdk(h: Any) -> dict[str, str]:
    return {
        "search_sdk.p50_ms": f"{h.client_p50_ms:.1f}",
        "search_sdk.p95_ms": f"{h.client_p95_ms:.1f}",
    }


#: figure key of bench/report.py -> what its headline sets
FROM_HEADLINE: dict[str, Callable[[Any], dict[str, str]]] = {
    "1": _chat,
    "2": _concurrency,
    "3": _enqueue,
    "4": _pipeline("consolidation", embedder=True),
    "4-locomo": _pipeline("consolidation_locomo", embedder=False),
    "5": _retrieval,
    "5-sdk": _search_sdk,
}


def record(found: Mapping[str, Any], *, run: str, source: Path = SOURCE) -> dict[str, str]:
    """Write the figures of a report run (figure key -> headline) into the source, each
    with the run it came from; figures this run did not make keep their older value."""
    data = json.loads(source.read_text())
    for key, headline in found.items():
        for name, value in FROM_HEADLINE.get(key, lambda _: {})(headline).items():
            data["figures"][name] = {"value": value, "run": run}
    source.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return load(source)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="report quotes that differ; exit 1")
    a = p.parse_args()
    figures = load()
    if a.check:
        wrong = mismatches(figures, pages())
        print("\n".join(wrong) or f"every quote matches {SOURCE.relative_to(REPO_ROOT)}")
        return 1 if wrong else 0
    for page in rewrite(figures, pages()):
        print(f"rewrote {page.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
