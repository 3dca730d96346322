"""Every Python block of the integration pages runs as written, against a live stack."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from memwell.local.worker_process import WorkerProcess
from tests.support.doc_blocks import run_blocks

PAGES = ["langgraph.md", "langchain.md", "llamaindex.md", "openai-agents.md"]


@pytest.mark.parametrize("page", PAGES)
def test_the_pages_example_runs(
    page: str,
    repo_root: Path,
    api_url: str,
    worker: WorkerProcess,
    make_key: Callable[..., dict[str, str]],
    ids: dict[str, str],
) -> None:
    key = make_key(ids["tenant"], ("read", "write"))["Authorization"].removeprefix("Bearer ")
    ran = run_blocks(repo_root / "docs" / "integrations" / page, url=api_url, key=key,
                     user=ids["user"])  # fmt: skip
    assert ran >= 1
