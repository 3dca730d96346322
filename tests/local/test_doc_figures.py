"""The performance figures the README and docs/ quote come from one file,
docs/figures/headline.json (written by `python -m bench.report`): a page that states a
quoted figure with another value, or a chat throughput outside a quote, fails here."""

from __future__ import annotations

import re
from pathlib import Path

from bench.doc_figures import load, mismatches, pages, quotes, rewrite

#: A chat throughput stated in prose ("184 chat req/s", "171-173 chats/s").
THROUGHPUT = re.compile(r"(\S+) (?:chat req/s|chats/s)")


def test_every_quoted_figure_is_the_sources(repo_root: Path) -> None:
    assert mismatches(load(), pages(repo_root)) == []


def test_no_quote_starts_a_line(repo_root: Path) -> None:
    # Markdown reads a line that starts with an HTML comment as a block of HTML: the
    # paragraph would end there and the figure stand alone.
    for page in pages(repo_root):
        for n, line in enumerate(page.read_text().splitlines(), 1):
            assert not line.lstrip().startswith("<!--fig "), f"{page.name}:{n}"


def test_every_figure_of_the_source_is_quoted_somewhere(repo_root: Path) -> None:
    quoted = {q.name for page in pages(repo_root) for q in quotes(page)}
    assert set(load()) - quoted == set()


def test_the_pages_that_disagreed_quote_the_same_chat_figures(repo_root: Path) -> None:
    for name in ("README.md", "docs/scaling.md", "docs/operations.md"):
        names = {q.name for q in quotes(repo_root / name)}
        assert names & {"chat.p95_ms", "chat_load.req_s"}, name


def test_a_chat_throughput_in_prose_is_a_quote(repo_root: Path) -> None:
    for page in pages(repo_root):
        for m in THROUGHPUT.finditer(page.read_text()):
            stated = m[1].strip("*(")
            assert not stated[:1].isdigit(), f"{page.name}: {m[0]!r} is not a quote"


def test_a_page_stating_another_value_is_caught_and_rewritten(tmp_path: Path) -> None:
    figures = {"chat.p95_ms": "15.0"}
    page = tmp_path / "page.md"
    page.write_text("p95 <!--fig chat.p95_ms-->9.3<!--/fig--> ms; <!--fig gone.x-->1<!--/fig-->\n")
    assert mismatches(figures, [page]) == [
        "page.md:1: chat.p95_ms says '9.3', the source '15.0'",
        "page.md:1: gone.x is not in headline.json",
    ]
    assert rewrite(figures, [page]) == [page]
    assert mismatches(figures, [page]) == ["page.md:1: gone.x is not in headline.json"]
    assert "p95 <!--fig chat.p95_ms-->15.0<!--/fig--> ms" in page.read_text()
