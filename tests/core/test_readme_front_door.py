"""The README is a front door: short, the two commands for a fresh machine first, and
every page it points to exists (the documentation site holds the rest)."""

from __future__ import annotations

import re
from pathlib import Path

#: The README is a front door; the documentation site (docs/) holds the rest.
MAX_LINES = 200


def test_readme_is_short_and_starts_with_the_two_commands(repo_root: Path) -> None:
    readme = (repo_root / "README.md").read_text()
    assert len(readme.splitlines()) <= MAX_LINES
    first_block = re.search(r"^```bash\n(.*?)^```", readme, re.M | re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands == ["bash scripts/start.sh", "bash scripts/test.sh"]


def test_readme_links_resolve(repo_root: Path) -> None:
    readme = (repo_root / "README.md").read_text()
    targets = {t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", readme)}
    local = {t for t in targets if t and "://" not in t}
    assert "docs/index.md" in local
    missing = sorted(t for t in local if not (repo_root / t).exists())
    assert missing == []
