"""The real-model tier runs only when asked for: the default run (scripts/test.sh)
deselects it, and `-m real_llm` selects only it. Part of the default suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def _collected(repo_root: Path, *args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         *args, "tests/real_llm"],
        cwd=repo_root, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_the_default_run_leaves_the_tier_out(repo_root: Path) -> None:
    default = _collected(repo_root)
    assert default and all("test_gguf_parts" in t or "test_tier_selection" in t for t in default)


def test_asking_for_the_tier_selects_it(repo_root: Path) -> None:
    tier = _collected(repo_root, "-m", "real_llm")
    assert any("test_demo.py::" in t for t in tier)
    assert any("test_server_restart.py::" in t for t in tier)
    assert not any("test_gguf_parts" in t for t in tier)
